//! Reading LEAF JSON files (plain or gzipped, one file or a directory tree) into writers.
//!
//! A LEAF file is `{"users": [...], "num_samples": [...], "user_data": {user: {"x": [[784
//! floats]...], "y": [labels...]}}}`. Pixels are stored as `u8` (`round(v · 255)`): LEAF
//! FEMNIST values are exactly `k/255`, so nothing is lost and the data takes a quarter of
//! the memory of `f32`.

use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::error::LeafError;
use crate::labels::NUM_CLASSES;

/// Pixels in one FEMNIST image (28 × 28, row-major).
pub const IMAGE_PIXELS: usize = 28 * 28;

/// One writer's samples: a writer is one device's local data in the federation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Writer {
    /// LEAF writer id, e.g. `f0424_27`.
    pub id: String,
    /// `len() × 784` raw pixels, `k` meaning LEAF value `k/255` (255 = white background).
    pub images: Vec<u8>,
    /// One label per image, `0..62` (see [`crate::label_char`]).
    pub labels: Vec<u8>,
}

impl Writer {
    /// Number of samples.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// Whether the writer holds no samples.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// The raw pixels of image `i`.
    pub fn image(&self, i: usize) -> &[u8] {
        &self.images[i * IMAGE_PIXELS..(i + 1) * IMAGE_PIXELS]
    }
}

#[derive(Deserialize)]
struct RawFile {
    users: Vec<String>,
    num_samples: Vec<i64>,
    #[serde(deserialize_with = "user_data")]
    user_data: Vec<(String, RawUser)>,
}

#[derive(Deserialize)]
struct RawUser {
    x: Pixels,
    y: Vec<i64>,
}

/// All of a writer's images, flattened while parsing so no `Vec<Vec<f64>>` is built.
struct Pixels {
    data: Vec<u8>,
    rows: usize,
}

fn user_data<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<(String, RawUser)>, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Vec<(String, RawUser)>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a map from writer id to {x, y}")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some(user) = map.next_key::<String>()? {
                // Re-wrap so the message names the writer whose data is bad.
                let value: RawUser = map
                    .next_value()
                    .map_err(|e| de::Error::custom(format!("writer {user}: {e}")))?;
                out.push((user, value));
            }
            Ok(out)
        }
    }
    d.deserialize_map(V)
}

impl<'de> Deserialize<'de> for Pixels {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Rows;
        impl<'de> Visitor<'de> for Rows {
            type Value = Pixels;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list of images of 784 floats")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Pixels, A::Error> {
                let mut px = Pixels {
                    data: Vec::with_capacity(seq.size_hint().unwrap_or(0) * IMAGE_PIXELS),
                    rows: 0,
                };
                loop {
                    let seed = Row {
                        out: &mut px.data,
                        index: px.rows,
                    };
                    if seq.next_element_seed(seed)?.is_none() {
                        break;
                    }
                    px.rows += 1;
                }
                Ok(px)
            }
        }
        d.deserialize_seq(Rows)
    }
}

/// Parses one image, appending its pixels to `out`.
struct Row<'a> {
    out: &'a mut Vec<u8>,
    index: usize,
}

impl<'de> DeserializeSeed<'de> for Row<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Row<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "image {} as a list of 784 floats", self.index)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let start = self.out.len();
        let mut n = 0usize;
        while let Some(v) = seq.next_element::<f64>()? {
            if !(0.0..=1.0).contains(&v) {
                return Err(de::Error::custom(format!(
                    "image {}: pixel {n} is {v}, outside [0, 1]",
                    self.index
                )));
            }
            if n < IMAGE_PIXELS {
                self.out.push((v * 255.0).round() as u8);
            }
            n += 1;
        }
        if n != IMAGE_PIXELS {
            self.out.truncate(start);
            return Err(de::Error::custom(format!(
                "image {}: {n} pixels, expected {IMAGE_PIXELS}",
                self.index
            )));
        }
        Ok(())
    }
}

/// Parse LEAF JSON bytes (already decompressed); `path` is only used in errors.
pub fn parse_leaf(path: &Path, json: &[u8]) -> Result<Vec<Writer>, LeafError> {
    let raw: RawFile = serde_json::from_slice(json).map_err(|e| LeafError::Parse {
        path: path.to_owned(),
        message: e.to_string(),
    })?;
    check(path, raw)
}

fn check(path: &Path, raw: RawFile) -> Result<Vec<Writer>, LeafError> {
    let bad = |user: &str, what: String| LeafError::Malformed {
        path: path.to_owned(),
        user: user.to_owned(),
        what,
    };
    if raw.users.len() != raw.num_samples.len() {
        return Err(bad(
            "-",
            format!(
                "{} users but {} num_samples entries",
                raw.users.len(),
                raw.num_samples.len()
            ),
        ));
    }
    let mut data: std::collections::HashMap<String, RawUser> = raw.user_data.into_iter().collect();
    let mut writers = Vec::with_capacity(raw.users.len());
    for (user, &claimed) in raw.users.iter().zip(&raw.num_samples) {
        let Some(u) = data.remove(user) else {
            return Err(bad(
                user,
                "listed in users but has no user_data entry".into(),
            ));
        };
        if u.x.rows != u.y.len() {
            return Err(bad(
                user,
                format!("{} images but {} labels", u.x.rows, u.y.len()),
            ));
        }
        if usize::try_from(claimed).ok() != Some(u.y.len()) {
            return Err(bad(
                user,
                format!("num_samples says {claimed} but user_data has {}", u.y.len()),
            ));
        }
        let mut labels = Vec::with_capacity(u.y.len());
        for (i, &y) in u.y.iter().enumerate() {
            if !(0..NUM_CLASSES as i64).contains(&y) {
                return Err(bad(
                    user,
                    format!("label {i} is {y}, outside 0..{NUM_CLASSES}"),
                ));
            }
            labels.push(y as u8);
        }
        writers.push(Writer {
            id: user.clone(),
            images: u.x.data,
            labels,
        });
    }
    if let Some(extra) = data.keys().min() {
        return Err(bad(
            extra,
            "has user_data but is not listed in users".into(),
        ));
    }
    Ok(writers)
}

/// Read one LEAF file, gunzipping it when its name ends in `.gz`.
pub fn read_leaf_file(path: &Path) -> Result<Vec<Writer>, LeafError> {
    let io = |source| LeafError::Io {
        path: path.to_owned(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let mut json = Vec::new();
    if path.extension().is_some_and(|e| e == "gz") {
        flate2::read::GzDecoder::new(file)
            .read_to_end(&mut json)
            .map_err(io)?;
    } else {
        std::io::BufReader::new(file)
            .read_to_end(&mut json)
            .map_err(io)?;
    }
    parse_leaf(path, &json)
}

/// The LEAF files under `path` (`*.json`, `*.json.gz`), sorted; `path` itself if it is a file.
pub fn leaf_files(path: &Path) -> Result<Vec<PathBuf>, LeafError> {
    let meta = std::fs::metadata(path).map_err(|source| LeafError::Io {
        path: path.to_owned(),
        source,
    })?;
    if meta.is_file() {
        return Ok(vec![path.to_owned()]);
    }
    let mut out = Vec::new();
    let mut stack = vec![path.to_owned()];
    while let Some(dir) = stack.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|source| LeafError::Io {
            path: dir.clone(),
            source,
        })?;
        for entry in entries {
            let p = entry
                .map_err(|source| LeafError::Io {
                    path: dir.clone(),
                    source,
                })?
                .path();
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if p.is_dir() {
                stack.push(p);
            } else if name.ends_with(".json") || name.ends_with(".json.gz") {
                out.push(p);
            }
        }
    }
    if out.is_empty() {
        return Err(LeafError::Empty(path.to_owned()));
    }
    out.sort();
    Ok(out)
}

/// Read every LEAF file under `path` (a file or a directory tree), in parallel, and
/// return the writers sorted by id. A writer found in two files is an error.
pub fn read_leaf(path: &Path) -> Result<Vec<Writer>, LeafError> {
    let files = leaf_files(path)?;
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(files.len());
    let next = AtomicUsize::new(0);
    type FileResult = (usize, Result<Vec<Writer>, LeafError>);
    let results: Mutex<Vec<FileResult>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(f) = files.get(i) else { break };
                    let r = read_leaf_file(f);
                    results
                        .lock()
                        .expect("no panics hold this lock")
                        .push((i, r));
                }
            });
        }
    });
    let mut results = results.into_inner().expect("threads joined");
    results.sort_by_key(|(i, _)| *i);
    let mut owner: std::collections::HashMap<String, usize> = Default::default();
    let mut writers = Vec::new();
    for (i, r) in results {
        for w in r? {
            if let Some(&first) = owner.get(&w.id) {
                return Err(LeafError::DuplicateWriter {
                    user: w.id,
                    first: files[first].clone(),
                    second: files[i].clone(),
                });
            }
            owner.insert(w.id.clone(), i);
            writers.push(w);
        }
    }
    writers.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(writers)
}
