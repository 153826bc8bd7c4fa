//! Bearer tokens: made here, kept only as SHA-256 digests (in SQLite and in memory), and
//! checked in constant time.
//!
//! A job token authorises a job's own endpoints: 128 random bits written as 32 lowercase
//! hex digits. A task token names one device's task: the task's id in lowercase hex, a
//! `-`, and 128 random bits as above (`1f4-0123…cdef`). The id is not secret — it says
//! where the task's row is, so the store keeps tasks in id order (an assignment appends
//! to the table instead of dirtying a random page of a token index) and a report finds
//! its task without a digest index; the random part is the credential. Task tokens from
//! before schema 8 are of the job token's form and are found by their digest.
//!
//! The manager hands a token out once and keeps its digest (of the whole token, id
//! included), so a copy of the database (or of the process's memory) holds no usable
//! credential; a presented token that is not of a token's form is refused before
//! anything is hashed.

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// Hex digits of a token.
pub const TOKEN_LEN: usize = 32;

/// A fresh token: 128 random bits as 32 lowercase hex digits.
pub fn new_token() -> String {
    format!("{:032x}", rand::random::<u128>())
}

/// Is `t` of a token's form (32 lowercase hex digits)?
pub fn well_formed(t: &str) -> bool {
    t.len() == TOKEN_LEN && t.bytes().all(is_lower_hex)
}

/// The digest a token is kept as (64 hex digits); `None` for a string that is not a
/// token.
pub fn digest(token: &str) -> Option<String> {
    well_formed(token).then(|| hex(&Sha256::digest(token.as_bytes())))
}

/// A task token's digest as bytes, as the manager keeps it in memory.
pub type Digest32 = [u8; 32];

/// Most hex digits of a task id (a `u64`).
const MAX_ID_DIGITS: usize = 16;

/// A fresh task token for task `id`: the id in hex, `-`, 128 random bits in hex.
pub fn new_task_token(id: u64) -> String {
    format!("{id:x}-{:032x}", rand::random::<u128>())
}

/// The task id a token of the task form names (`None` for any other string, a token of
/// the older form included). The id is canonical hex (no leading zeros), so a task has
/// one token string.
pub fn task_id(token: &str) -> Option<u64> {
    let (id, secret) = token.split_once('-')?;
    let canonical = !id.is_empty() && id.len() <= MAX_ID_DIGITS && !id.starts_with('0');
    if !canonical || !well_formed(secret) || !id.bytes().all(is_lower_hex) {
        return None;
    }
    u64::from_str_radix(id, 16).ok()
}

/// The digest of a task token of either form (the task form, or the older form of
/// [`well_formed`]); `None` for a string that is neither.
pub fn task_digest(token: &str) -> Option<Digest32> {
    (task_id(token).is_some() || well_formed(token))
        .then(|| Sha256::digest(token.as_bytes()).into())
}

/// Are two digests the same? Compared in constant time.
pub fn same_digest(a: &Digest32, b: &Digest32) -> bool {
    bool::from(a.ct_eq(b))
}

/// A digest as the store keeps it: 64 lowercase hex digits.
pub fn digest_hex(d: &Digest32) -> String {
    hex(d)
}

/// The digest in `s` (64 hex digits, as [`digest_hex`] writes them); `None` otherwise.
pub fn parse_digest(s: &str) -> Option<Digest32> {
    let b = s.as_bytes();
    if b.len() != 64 {
        return None;
    }
    let mut d = [0u8; 32];
    for (i, pair) in b.chunks_exact(2).enumerate() {
        d[i] = (nibble(pair[0])? << 4) | nibble(pair[1])?;
    }
    Some(d)
}

fn is_lower_hex(b: u8) -> bool {
    matches!(b, b'0'..=b'9' | b'a'..=b'f')
}

fn nibble(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Does `presented` hash to `stored` (a digest)? Compared in constant time.
pub fn matches(stored: &str, presented: &str) -> bool {
    digest(presented).is_some_and(|d| bool::from(d.as_bytes().ct_eq(stored.as_bytes())))
}

/// Is `presented` the operator's `secret`? Both are hashed first so that the comparison
/// takes the same time whatever their lengths and contents.
pub fn same_secret(secret: &str, presented: &str) -> bool {
    let (a, b) = (
        Sha256::digest(secret.as_bytes()),
        Sha256::digest(presented.as_bytes()),
    );
    bool::from(a.as_slice().ct_eq(b.as_slice()))
}

/// Lowercase hex, a table lookup per nibble (this runs once per assignment, where
/// `format!` per byte showed in profiles).
fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 0xf)] as char);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_matches_its_digest_only() {
        let t = new_token();
        assert!(well_formed(&t));
        let d = digest(&t).unwrap();
        assert_eq!(d.len(), 64);
        assert!(matches(&d, &t));
        assert!(!matches(&d, &new_token()));
        // Not of the form: refused, whatever it hashes to.
        assert_eq!(digest(&t.to_uppercase()), None);
        assert_eq!(digest("nope"), None);
        assert!(!matches(&d, &d));
        // SHA-256 of "0" × 32, as `sha256sum` prints it.
        assert_eq!(
            digest(&"0".repeat(32)).unwrap(),
            "84e0c0eafaa95a34c293f278ac52e45ce537bab5e752a00e6959a13ae103b65a"
        );
    }

    #[test]
    fn a_task_token_names_its_id_and_matches_its_digest_only() {
        let t = new_task_token(0x1f4);
        assert!(t.starts_with("1f4-"), "{t}");
        assert_eq!(task_id(&t), Some(0x1f4));
        assert_eq!(task_id(&new_task_token(u64::MAX)), Some(u64::MAX));
        let d = task_digest(&t).unwrap();
        assert!(same_digest(&d, &task_digest(&t).unwrap()));
        assert!(!same_digest(
            &d,
            &task_digest(&new_task_token(0x1f4)).unwrap()
        ));
        assert_eq!(parse_digest(&digest_hex(&d)), Some(d));
        // The hex digest is the one the older form is kept as.
        let old = new_token();
        assert_eq!(
            digest_hex(&task_digest(&old).unwrap()),
            digest(&old).unwrap()
        );
        assert_eq!(task_id(&old), None);
        // Not of the form: no id, no digest.
        let secret = "0".repeat(32);
        for bad in [
            format!("01f4-{secret}"),
            format!("-{secret}"),
            format!("1F4-{secret}"),
            format!("1f4-{}", "0".repeat(31)),
            format!("10000000000000000-{secret}"),
            format!("1f4-{secret}-"),
            "nope".to_string(),
        ] {
            assert_eq!(task_id(&bad), None, "{bad}");
            assert_eq!(task_digest(&bad), None, "{bad}");
        }
        assert_eq!(parse_digest("zz"), None);
    }
}
