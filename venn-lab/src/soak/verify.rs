//! What must hold in the manager's database after the soak, read straight from the
//! SQLite file once the manager is gone: the file is intact, every acknowledged
//! assignment is a task row and every acknowledged result a finished one (tokens are kept
//! as their digests, as the manager keeps them), no round of a job closed as a success
//! twice, each job's count of rounds done agrees with its successful rounds, and every job
//! the soak started has ended — the last registration of each as finished with all its
//! rounds.

use std::collections::HashMap;
use std::path::Path;

use rusqlite::{Connection, OpenFlags, params};
use venn_manager::tokens;

/// One check, in words, whether it held, and what was found.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Check {
    /// What was checked.
    pub what: String,
    /// Whether it held.
    pub held: bool,
    /// What was found (counts, the first offenders).
    pub found: String,
}

impl Check {
    /// A check that `held`, with what was `found`.
    pub fn new(what: impl Into<String>, held: bool, found: impl Into<String>) -> Check {
        Check {
            what: what.into(),
            held,
            found: found.into(),
        }
    }
}

/// What the soak expects to find.
pub struct Expected<'a> {
    /// Tokens whose acknowledgement the manager answered 2xx.
    pub acked: &'a [String],
    /// Tokens whose finished report it answered 2xx.
    pub finished: &'a [String],
    /// Each experiment job's name (one per arrival) and its rounds.
    pub jobs: &'a HashMap<String, u32>,
}

/// Runs every check on the database at `db`.
pub fn verify(db: &Path, want: &Expected<'_>) -> rusqlite::Result<Vec<Check>> {
    let conn = Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    let integrity: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0))?;
    let mut checks = vec![Check::new(
        "the database passes PRAGMA integrity_check",
        integrity == "ok",
        integrity,
    )];
    checks.push(tokens_in(&conn, want.acked, false)?);
    checks.push(tokens_in(&conn, want.finished, true)?);
    checks.push(no_round_twice(&conn)?);
    checks.push(rounds_done_agree(&conn)?);
    checks.extend(jobs_ended(&conn, want.jobs)?);
    Ok(checks)
}

/// Every token in `tokens` is a task row (finished, when `finished`).
fn tokens_in(conn: &Connection, tokens: &[String], finished: bool) -> rusqlite::Result<Check> {
    // A task token names its row's id; the row keeps the token's digest.
    let mut st = conn.prepare("SELECT state, digest FROM tasks WHERE id = ?1")?;
    let (mut missing, mut wrong) = (Vec::new(), Vec::new());
    for token in tokens {
        let row = tokens::task_id(token).zip(tokens::task_digest(token));
        let state: Option<String> = match row {
            None => None,
            Some((id, digest)) => st
                .query_row(params![id as i64], |r| {
                    Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
                })
                .map(|(state, stored)| (stored == tokens::digest_hex(&digest)).then_some(state))
                .or_else(|e| match e {
                    rusqlite::Error::QueryReturnedNoRows => Ok(None),
                    e => Err(e),
                })?,
        };
        match state {
            None => missing.push(token),
            Some(s) if finished && s != "finished" => wrong.push(s),
            Some(_) => {}
        }
    }
    let what = if finished {
        "every result acknowledged to a device is a finished task"
    } else {
        "every assignment acknowledged to a device is in the tasks table"
    };
    let found = format!(
        "{} acknowledged, {} missing, {} in another state{}",
        tokens.len(),
        missing.len(),
        wrong.len(),
        wrong
            .first()
            .map_or(String::new(), |s| format!(" (first: {s})"))
    );
    Ok(Check::new(
        what,
        missing.is_empty() && wrong.is_empty(),
        found,
    ))
}

/// No (job, round) closed as a success more than once.
fn no_round_twice(conn: &Connection) -> rusqlite::Result<Check> {
    let twice: Vec<(i64, i64, i64)> = conn
        .prepare(
            "SELECT job_id, round, COUNT(*) FROM rounds WHERE outcome = 'success'
             GROUP BY job_id, round HAVING COUNT(*) > 1",
        )?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<Result<_, _>>()?;
    let total: i64 = conn.query_row(
        "SELECT COUNT(*) FROM rounds WHERE outcome = 'success'",
        [],
        |r| r.get(0),
    )?;
    Ok(Check::new(
        "no round is counted twice (one successful close per job and round)",
        twice.is_empty(),
        format!(
            "{total} successful closes, {} rounds closed twice{}",
            twice.len(),
            twice.first().map_or(String::new(), |(j, r, n)| format!(
                " (first: job {j} round {r}, {n} times)"
            ))
        ),
    ))
}

/// Each job's `rounds_done` is its number of successful rounds.
fn rounds_done_agree(conn: &Connection) -> rusqlite::Result<Check> {
    let off: Vec<(i64, i64, i64)> = conn
        .prepare(
            "SELECT j.id, j.rounds_done,
                    (SELECT COUNT(DISTINCT r.round) FROM rounds r
                      WHERE r.job_id = j.id AND r.outcome = 'success') AS ok
             FROM jobs j WHERE j.rounds_done != ok",
        )?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<Result<_, _>>()?;
    Ok(Check::new(
        "each job's rounds done equals its successful rounds",
        off.is_empty(),
        off.first().map_or("all agree".into(), |(j, d, ok)| {
            format!("job {j}: rounds_done {d}, successful rounds {ok}")
        }),
    ))
}

/// Every job the soak started ended: the last registration of each name finished with
/// all its rounds, earlier ones (killed) ended too; no job is left active.
fn jobs_ended(conn: &Connection, want: &HashMap<String, u32>) -> rusqlite::Result<Vec<Check>> {
    let rows: Vec<(i64, String, String, i64)> = conn
        .prepare("SELECT id, name, state, rounds_done FROM jobs ORDER BY id")?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
        .collect::<Result<_, _>>()?;
    let mut last: HashMap<&str, (&str, i64)> = HashMap::new();
    for (_, name, state, done) in &rows {
        last.insert(name, (state, *done));
    }
    let mut unfinished: Vec<String> = Vec::new();
    for (name, rounds) in want {
        match last.get(name.as_str()) {
            Some(&("finished", done)) if done == i64::from(*rounds) => {}
            Some((state, done)) => {
                unfinished.push(format!("{name}: {state}, {done}/{rounds} rounds"))
            }
            None => unfinished.push(format!("{name}: never registered")),
        }
    }
    unfinished.sort();
    let active: Vec<String> = rows
        .iter()
        .filter(|(_, _, state, _)| state == "active")
        .map(|(id, name, _, _)| format!("{name} (job {id})"))
        .collect();
    let earlier = rows.len() - last.len();
    Ok(vec![
        Check::new(
            "every job finished all its rounds (its last registration)",
            unfinished.is_empty(),
            if unfinished.is_empty() {
                format!("{} jobs finished", want.len())
            } else {
                unfinished.join("; ")
            },
        ),
        Check::new(
            "no job is left active (killed registrations ended too)",
            active.is_empty(),
            if active.is_empty() {
                format!(
                    "{} registrations, {earlier} of them replaced by a restart",
                    rows.len()
                )
            } else {
                format!("still active: {}", active.join(", "))
            },
        ),
    ])
}
