//! The LEAF loader on small generated fixtures: plain, gzipped, directory trees, malformed.

use std::io::Write;
use std::path::{Path, PathBuf};

use datasets::{Femnist, IMAGE_PIXELS, LeafError, WriterSet, read_leaf, read_leaf_file};

/// A fresh empty directory under the target dir, unique per test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("venn-leaf-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// LEAF JSON for writers `(id, labels)`; image `i` of a writer is all `(i % 256)/255`.
fn leaf_json(writers: &[(&str, &[u8])]) -> String {
    let users: Vec<String> = writers.iter().map(|(id, _)| format!("\"{id}\"")).collect();
    let counts: Vec<String> = writers.iter().map(|(_, y)| y.len().to_string()).collect();
    let data: Vec<String> = writers
        .iter()
        .map(|(id, ys)| {
            let xs: Vec<String> = (0..ys.len())
                .map(|i| {
                    let v = (i % 256) as f64 / 255.0;
                    format!("[{}]", vec![v.to_string(); IMAGE_PIXELS].join(","))
                })
                .collect();
            let ys: Vec<String> = ys.iter().map(u8::to_string).collect();
            format!(
                "\"{id}\":{{\"x\":[{}],\"y\":[{}]}}",
                xs.join(","),
                ys.join(",")
            )
        })
        .collect();
    format!(
        "{{\"users\":[{}],\"num_samples\":[{}],\"user_data\":{{{}}}}}",
        users.join(","),
        counts.join(","),
        data.join(",")
    )
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    if path.extension().is_some_and(|e| e == "gz") {
        let f = std::fs::File::create(path).unwrap();
        let mut gz = flate2::write::GzEncoder::new(f, flate2::Compression::fast());
        gz.write_all(text.as_bytes()).unwrap();
        gz.finish().unwrap();
    } else {
        std::fs::write(path, text).unwrap();
    }
}

#[test]
fn plain_and_gzipped_files_load_the_same() {
    let dir = scratch("plain-gz");
    let json = leaf_json(&[("f0002_01", &[3, 61]), ("f0001_00", &[0])]);
    write(&dir.join("a.json"), &json);
    write(&dir.join("a.json.gz"), &json);
    let plain = read_leaf_file(&dir.join("a.json")).unwrap();
    let gz = read_leaf_file(&dir.join("a.json.gz")).unwrap();
    assert_eq!(plain, gz);
    assert_eq!(plain.len(), 2);
    let w = plain.iter().find(|w| w.id == "f0002_01").unwrap();
    assert_eq!(w.labels, [3, 61]);
    assert_eq!(w.images.len(), 2 * IMAGE_PIXELS);
    assert!(w.image(0).iter().all(|&k| k == 0));
    assert!(
        w.image(1).iter().all(|&k| k == 1),
        "1/255 is stored as k = 1"
    );
}

#[test]
fn directory_tree_loads_sorted_and_splits_pair_up() {
    let dir = scratch("tree");
    write(
        &dir.join("train/shard_01.json.gz"),
        &leaf_json(&[("f0003_00", &[1, 2, 3])]),
    );
    write(
        &dir.join("train/sub/shard_00.json"),
        &leaf_json(&[("f0001_00", &[4]), ("f0002_00", &[5, 6])]),
    );
    write(&dir.join("train/README.md"), "not data");
    write(
        &dir.join("test/shard_00.json.gz"),
        &leaf_json(&[("f0001_00", &[7])]),
    );
    let train = read_leaf(&dir.join("train")).unwrap();
    let ids: Vec<&str> = train.iter().map(|w| w.id.as_str()).collect();
    assert_eq!(ids, ["f0001_00", "f0002_00", "f0003_00"]);

    let data = Femnist::load(&dir, WriterSet::Main).unwrap();
    let stats = data.stats();
    assert_eq!(
        (
            stats.writers,
            stats.train_samples,
            stats.test_samples,
            stats.classes
        ),
        (3, 6, 1, 7)
    );
    let (tr, te) = data.partition("f0001_00");
    assert_eq!(tr.unwrap().labels, [4]);
    assert_eq!(te.unwrap().labels, [7]);
    assert!(data.partition("f0003_00").1.is_none());
}

/// Load `text` as a file and return the error message.
fn error_for(name: &str, text: &str) -> (LeafError, String) {
    let dir = scratch(name);
    let path = dir.join("bad.json.gz");
    write(&path, text);
    let err = read_leaf_file(&path).expect_err("malformed input must be refused");
    let msg = err.to_string();
    assert!(msg.contains("bad.json.gz"), "error names the file: {msg}");
    (err, msg)
}

#[test]
fn malformed_files_give_clear_errors() {
    let good = leaf_json(&[("f0001_00", &[1, 2])]);

    let (e, msg) = error_for("syntax", &good[..good.len() - 5]);
    assert!(matches!(e, LeafError::Parse { .. }), "{msg}");

    let (_, msg) = error_for(
        "count",
        &good.replace("\"num_samples\":[2]", "\"num_samples\":[3]"),
    );
    assert!(
        msg.contains("f0001_00") && msg.contains("num_samples says 3"),
        "{msg}"
    );

    let (_, msg) = error_for("label", &good.replace("\"y\":[1,2]", "\"y\":[1,62]"));
    assert!(
        msg.contains("f0001_00") && msg.contains("label 1 is 62"),
        "{msg}"
    );

    let short = good.replacen("[0,", "[", 1);
    let (_, msg) = error_for("short", &short);
    assert!(
        msg.contains("f0001_00") && msg.contains("783 pixels"),
        "{msg}"
    );

    let (_, msg) = error_for("range", &good.replacen("[0,", "[1.5,", 1));
    assert!(msg.contains("outside [0, 1]"), "{msg}");

    let (_, msg) = error_for(
        "missing",
        &good.replace("\"users\":[\"f0001_00\"]", "\"users\":[\"f0009_00\"]"),
    );
    assert!(
        msg.contains("f0009_00") && msg.contains("no user_data"),
        "{msg}"
    );

    let (_, msg) = error_for("nofield", "{\"users\":[],\"num_samples\":[]}");
    assert!(msg.contains("user_data"), "{msg}");

    let dir = scratch("notgz");
    std::fs::write(dir.join("x.json.gz"), good.as_bytes()).unwrap();
    let msg = read_leaf_file(&dir.join("x.json.gz"))
        .unwrap_err()
        .to_string();
    assert!(msg.contains("x.json.gz"), "{msg}");
}

#[test]
fn a_writer_in_two_files_is_refused_and_empty_dirs_too() {
    let dir = scratch("dup");
    let json = leaf_json(&[("f0001_00", &[1])]);
    write(&dir.join("a.json"), &json);
    write(&dir.join("b.json"), &json);
    let msg = read_leaf(&dir).unwrap_err().to_string();
    assert!(msg.contains("f0001_00") && msg.contains("b.json"), "{msg}");
    let empty = scratch("empty");
    assert!(matches!(read_leaf(&empty), Err(LeafError::Empty(_))));
}
