//! Converting Flower's FEMNIST parquet (`flwrlabs/femnist`) into the project's LEAF
//! layout (see `shared/data/femnist/README.md`).
//!
//! Input rows are `image {bytes: PNG, path}`, `writer_id`, `hsf_id`, `character`. Each
//! PNG is decoded to 28 × 28 8-bit gray (RGB/RGBA is converted with integer Rec. 601
//! weights, alpha is ignored), the rows are grouped by writer, and each writer is split
//! 90/10 like LEAF: `n_train = max(1, ⌊0.9·n⌋)`, `n_test = n − n_train`, taking the
//! writer's samples (in file order) in the order of [`crate::shuffle`] seeded by
//! [`writer_seed`] (FNV-1a 64 of the writer id's UTF-8 bytes). A writer with a single
//! sample has no test part and is left out of the test shard.
//!
//! The project stores LEAF values `k/255` with 255 = white background. The source's
//! polarity is measured rather than assumed: [`detect_polarity`] takes the mean of the
//! border pixels of the first [`POLARITY_SAMPLE`] images; a dark border (mean < 127.5)
//! means the images are inverted and every pixel is written as `255 − k`. Which was done
//! is recorded in `SOURCE.json`.
//!
//! Writers are sorted by id and cut into shards of [`SHARD_WRITERS`]:
//! `train/shard_NNN.json.gz` and `test/shard_NNN.json.gz` hold the same writers. Each is
//! gzip (level 6, mtime 0) of one compact LEAF JSON object with pixels written as
//! Python's `repr` of `k/255`, streamed through the encoder shard by shard (so only the
//! `u8` pixels of the whole set are in memory). Beside them go `writers.tsv`,
//! `SHA256SUMS` and `SOURCE.json`. Everything is written into a hidden sibling directory
//! that is renamed into place at the end, so an interrupted run never leaves a half
//! dataset where the loader looks. The output is a pure function of the input rows.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use flate2::{Compression, GzBuilder};
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::Field;
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::error::{DownloadError, io_err};
use super::http::{count_bar, hex, sha256_file};
use crate::labels::NUM_CLASSES;
use crate::leaf::IMAGE_PIXELS;
use crate::shuffle::shuffled_indices;

/// Writers per shard.
pub const SHARD_WRITERS: usize = 20;

/// How many images (the first in file order) [`detect_polarity`] looks at.
pub const POLARITY_SAMPLE: usize = 1000;

/// Image side in pixels.
const SIDE: usize = 28;

/// How the source's pixels were mapped onto the project's convention.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Polarity {
    /// The source already has a light background: pixels kept.
    AsIs,
    /// The source has a dark background: each pixel `k` written as `255 − k`.
    Inverted,
}

/// The outcome of [`detect_polarity`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PolarityCheck {
    /// What was applied.
    pub polarity: Polarity,
    /// Mean border pixel (0..=255) of the sampled source images, before any inversion.
    pub border_mean: f64,
    /// Images sampled.
    pub images: usize,
}

/// Decide the polarity from concatenated 784-pixel images: the mean of each image's
/// border (the outer ring of 108 pixels) over all of them; below 127.5 (a dark
/// background) means [`Polarity::Inverted`]. No images means [`Polarity::AsIs`].
pub fn detect_polarity(images: &[u8]) -> PolarityCheck {
    let mut sum = 0u64;
    let mut count = 0u64;
    for img in images.chunks_exact(IMAGE_PIXELS) {
        let (s, c) = border_sum(img);
        sum += s;
        count += c;
    }
    polarity_from(sum, count, images.len() / IMAGE_PIXELS)
}

fn polarity_from(sum: u64, count: u64, images: usize) -> PolarityCheck {
    let border_mean = if count == 0 {
        255.0
    } else {
        sum as f64 / count as f64
    };
    PolarityCheck {
        polarity: if border_mean < 127.5 {
            Polarity::Inverted
        } else {
            Polarity::AsIs
        },
        border_mean,
        images,
    }
}

/// Sum and count of the border pixels of one 28 × 28 image.
fn border_sum(img: &[u8]) -> (u64, u64) {
    let mut sum = 0u64;
    let mut count = 0u64;
    for r in 0..SIDE {
        for c in 0..SIDE {
            if r == 0 || c == 0 || r == SIDE - 1 || c == SIDE - 1 {
                sum += u64::from(img[r * SIDE + c]);
                count += 1;
            }
        }
    }
    (sum, count)
}

/// Decode a PNG to 784 gray pixels (row-major). 8-bit gray is taken as is; other bit
/// depths and palettes are expanded to 8 bits, RGB(A) is converted to gray
/// (`(299 r + 587 g + 114 b + 500) / 1000`, exact for gray RGB), alpha is ignored. Any
/// size other than 28 × 28 is an error.
pub fn decode_png(bytes: &[u8]) -> Result<Vec<u8>, String> {
    let mut decoder = png::Decoder::new(std::io::Cursor::new(bytes));
    decoder.set_transformations(png::Transformations::normalize_to_color8());
    let mut reader = decoder.read_info().map_err(|e| format!("bad PNG: {e}"))?;
    let (w, h) = (reader.info().width, reader.info().height);
    if (w, h) != (SIDE as u32, SIDE as u32) {
        return Err(format!("image is {w}x{h}, expected {SIDE}x{SIDE}"));
    }
    // 28 x 28 (checked above): small, whatever the color type.
    let mut buf = vec![0u8; reader.output_buffer_size()];
    let info = reader
        .next_frame(&mut buf)
        .map_err(|e| format!("bad PNG: {e}"))?;
    let stride = info.line_size;
    let channels = info.color_type.samples();
    let mut out = Vec::with_capacity(IMAGE_PIXELS);
    for r in 0..SIDE {
        let line = &buf[r * stride..r * stride + SIDE * channels];
        for px in line.chunks_exact(channels) {
            out.push(match px.len() {
                1 | 2 => px[0],
                _ => {
                    let g =
                        299 * u32::from(px[0]) + 587 * u32::from(px[1]) + 114 * u32::from(px[2]);
                    ((g + 500) / 1000) as u8
                }
            });
        }
    }
    Ok(out)
}

/// LEAF's per-writer split of `n` samples: `(max(1, ⌊0.9·n⌋), rest)`; `(0, 0)` for 0.
pub fn split_sizes(n: usize) -> (usize, usize) {
    if n == 0 {
        return (0, 0);
    }
    let train = (n * 9 / 10).max(1);
    (train, n - train)
}

/// The shuffle seed of a writer: FNV-1a 64 (offset basis `0xcbf29ce484222325`, prime
/// `0x100000001b3`) of the id's UTF-8 bytes.
pub fn writer_seed(id: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in id.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Provenance and display settings for [`convert`].
#[derive(Debug, Clone, Default)]
pub struct ConvertOptions {
    /// Where the parquet came from (recorded in `SOURCE.json`), e.g.
    /// `https://huggingface.co/datasets/flwrlabs/femnist`.
    pub source_url: String,
    /// The source dataset's name, recorded in `writers.tsv` (`source_repos`) and
    /// `SOURCE.json`; `flwrlabs/femnist` when empty.
    pub source_repo: String,
    /// No progress bars.
    pub quiet: bool,
}

/// One input file as recorded in `SOURCE.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SourceFile {
    /// File name.
    pub name: String,
    /// Size in bytes.
    pub size: u64,
    /// SHA-256 (lowercase hex).
    pub sha256: String,
    /// Rows read from it.
    pub rows: u64,
}

/// What [`convert`] produced.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConvertReport {
    /// The FEMNIST directory written (holding `train/` and `test/`).
    pub dir: PathBuf,
    /// The input files.
    pub files: Vec<SourceFile>,
    /// Rows (samples) read.
    pub rows: u64,
    /// Distinct writers.
    pub writers: usize,
    /// Train samples written.
    pub train_samples: usize,
    /// Test samples written.
    pub test_samples: usize,
    /// Shards per split.
    pub shards: usize,
    /// The polarity found and applied.
    pub polarity: PolarityCheck,
    /// Total bytes of the `.json.gz` shards.
    pub shard_bytes: u64,
}

/// One writer's samples in file order.
#[derive(Default)]
struct Acc {
    /// Index of each sample's image in the one pixel buffer of all rows.
    rows: Vec<usize>,
    /// Each sample's label.
    labels: Vec<u8>,
}

/// Convert the parquet `files` (read in the given order) into the FEMNIST directory
/// `dest` (e.g. `DIR/femnist`), replacing it if present.
pub fn convert(
    files: &[PathBuf],
    dest: &Path,
    opts: &ConvertOptions,
) -> Result<ConvertReport, DownloadError> {
    let repo = if opts.source_repo.is_empty() {
        "flwrlabs/femnist"
    } else {
        opts.source_repo.as_str()
    };
    let (images, writers, sources, polarity) = read_rows(files, !opts.quiet)?;
    let rows: u64 = sources.iter().map(|s| s.rows).sum();

    let name = dest
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("femnist");
    let parent = dest.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(parent).map_err(io_err(parent))?;
    let staging = parent.join(format!(".{name}.partial"));
    if staging.exists() {
        fs::remove_dir_all(&staging).map_err(io_err(&staging))?;
    }
    for split in ["train", "test"] {
        let d = staging.join(split);
        fs::create_dir_all(&d).map_err(io_err(&d))?;
    }

    let shards: Vec<&[(String, Acc)]> = writers.chunks(SHARD_WRITERS).collect();
    let sums = write_shards(&staging, &images, &shards, polarity.polarity, !opts.quiet)?;
    let shard_bytes = sums.iter().map(|(_, _, n)| n).sum();

    // writers.tsv
    let mut tsv = String::from(
        "writer\tset\tshard\tn_train\tn_test\tn_total\tpossibly_truncated\tsource_repos\n",
    );
    let (mut train_samples, mut test_samples) = (0, 0);
    for (s, shard) in shards.iter().enumerate() {
        for (id, acc) in shard.iter() {
            let n = acc.labels.len();
            let (tr, te) = split_sizes(n);
            train_samples += tr;
            test_samples += te;
            tsv.push_str(&format!(
                "{id}\tmain\t{}\t{tr}\t{te}\t{n}\tn/a\t{repo}\n",
                shard_name(s)
            ));
        }
    }
    write_file(&staging.join("writers.tsv"), tsv.as_bytes())?;

    // SHA256SUMS, sorted by path like the shared set's.
    let mut lines: Vec<String> = sums
        .iter()
        .map(|(path, sha, _)| format!("{sha}  ./{path}\n"))
        .collect();
    lines.sort_by(|a, b| a[66..].cmp(&b[66..]));
    write_file(&staging.join("SHA256SUMS"), lines.concat().as_bytes())?;

    let report = ConvertReport {
        dir: dest.to_owned(),
        files: sources,
        rows,
        writers: writers.len(),
        train_samples,
        test_samples,
        shards: shards.len(),
        polarity,
        shard_bytes,
    };
    let source = serde_json::json!({
        "source": opts.source_url,
        "source_repo": repo,
        "license": "BSD-2-Clause (LEAF); images from NIST Special Database 19",
        "files": report.files,
        "rows": rows,
        "writers": report.writers,
        "train_samples": train_samples,
        "test_samples": test_samples,
        "shards": report.shards,
        "shard_writers": SHARD_WRITERS,
        "polarity": polarity,
        "split": "per writer: n_train = max(1, floor(0.9 n)), n_test = n - n_train; \
                  order = datasets::shuffle seeded by FNV-1a 64 of the writer id",
        "tool": concat!("datasets ", env!("CARGO_PKG_VERSION"), " (femnist download)"),
    });
    let mut text = serde_json::to_string_pretty(&source).expect("JSON values serialize");
    text.push('\n');
    write_file(&staging.join("SOURCE.json"), text.as_bytes())?;

    install(&staging, dest)?;
    Ok(report)
}

/// `shard_NNN.json.gz`.
fn shard_name(i: usize) -> String {
    format!("shard_{i:03}.json.gz")
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), DownloadError> {
    fs::write(path, bytes).map_err(io_err(path))
}

/// Move `staging` to `dest`, replacing what was there.
fn install(staging: &Path, dest: &Path) -> Result<(), DownloadError> {
    if dest.exists() {
        let name = dest
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("femnist");
        let old = dest.with_file_name(format!(".{name}.old"));
        if old.exists() {
            fs::remove_dir_all(&old).map_err(io_err(&old))?;
        }
        fs::rename(dest, &old).map_err(io_err(dest))?;
        fs::rename(staging, dest).map_err(io_err(dest))?;
        fs::remove_dir_all(&old).map_err(io_err(&old))?;
    } else {
        fs::rename(staging, dest).map_err(io_err(dest))?;
    }
    Ok(())
}

/// All pixels (row-major images in row order), writers sorted by id, inputs, polarity.
type Grouped = (Vec<u8>, Vec<(String, Acc)>, Vec<SourceFile>, PolarityCheck);

/// Read every row, decode its image, group by writer (sorted by id). The pixels go into
/// one buffer sized from the parquet metadata, so memory is 784 bytes a sample.
fn read_rows(files: &[PathBuf], progress: bool) -> Result<Grouped, DownloadError> {
    let mut readers = Vec::new();
    let mut total = 0u64;
    for path in files {
        let file = File::open(path).map_err(io_err(path))?;
        let reader = SerializedFileReader::new(file).map_err(|e| DownloadError::Parquet {
            path: path.clone(),
            message: e.to_string(),
        })?;
        total += u64::try_from(reader.metadata().file_metadata().num_rows()).unwrap_or(0);
        readers.push(reader);
    }
    let bar = count_bar(total, "decoding", progress);
    let mut groups: BTreeMap<String, Acc> = BTreeMap::new();
    let mut images: Vec<u8> = Vec::with_capacity(
        usize::try_from(total)
            .unwrap_or(0)
            .saturating_mul(IMAGE_PIXELS),
    );
    let mut index = 0usize;
    let mut sources = Vec::new();
    let (mut border, mut border_n, mut sampled) = (0u64, 0u64, 0usize);
    for (path, reader) in files.iter().zip(&readers) {
        let perr = |e: parquet::errors::ParquetError| DownloadError::Parquet {
            path: path.clone(),
            message: e.to_string(),
        };
        let mut rows = 0u64;
        for row in reader.get_row_iter(None).map_err(perr)? {
            let row = row.map_err(perr)?;
            let bad = |message: String| DownloadError::Row {
                path: path.clone(),
                row: rows,
                message,
            };
            let (mut png, mut writer, mut label) = (None, None, None);
            for (name, field) in row.into_columns() {
                match name.as_str() {
                    "image" => png = Some(image_bytes(field).map_err(&bad)?),
                    "writer_id" => writer = Some(string(field).map_err(&bad)?),
                    "character" => label = Some(integer(field).map_err(&bad)?),
                    _ => {}
                }
            }
            let png = png.ok_or_else(|| bad("no `image` column".into()))?;
            let writer = writer.ok_or_else(|| bad("no `writer_id` column".into()))?;
            let label = label.ok_or_else(|| bad("no `character` column".into()))?;
            if !(0..NUM_CLASSES as i64).contains(&label) {
                return Err(bad(format!(
                    "writer {writer}: label {label} outside 0..{NUM_CLASSES}"
                )));
            }
            let pixels = decode_png(&png).map_err(|m| bad(format!("writer {writer}: {m}")))?;
            if sampled < POLARITY_SAMPLE {
                let (s, c) = border_sum(&pixels);
                border += s;
                border_n += c;
                sampled += 1;
            }
            let acc = match groups.get_mut(&writer) {
                Some(acc) => acc,
                None => groups.entry(writer).or_default(),
            };
            images.extend_from_slice(&pixels);
            acc.rows.push(index);
            acc.labels.push(label as u8);
            index += 1;
            rows += 1;
            if rows.is_multiple_of(4096) {
                bar.inc(4096);
            }
        }
        bar.inc(rows % 4096);
        sources.push(SourceFile {
            name: path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            size: fs::metadata(path).map_err(io_err(path))?.len(),
            sha256: sha256_file(path)?,
            rows,
        });
    }
    bar.finish_and_clear();
    let polarity = polarity_from(border, border_n, sampled);
    Ok((images, groups.into_iter().collect(), sources, polarity))
}

fn image_bytes(field: Field) -> Result<Vec<u8>, String> {
    match field {
        Field::Group(row) => {
            for (name, f) in row.into_columns() {
                if name == "bytes" {
                    return match f {
                        Field::Bytes(b) => Ok(b.data().to_vec()),
                        other => Err(format!("image.bytes is {other:?}, expected binary")),
                    };
                }
            }
            Err("image has no `bytes` field".into())
        }
        Field::Bytes(b) => Ok(b.data().to_vec()),
        Field::Null => Err("image is null".into()),
        _ => Err("image is neither a struct {bytes, path} nor binary".into()),
    }
}

fn string(field: Field) -> Result<String, String> {
    match field {
        Field::Str(s) => Ok(s),
        Field::Bytes(b) => {
            String::from_utf8(b.data().to_vec()).map_err(|_| "writer_id is not UTF-8".to_owned())
        }
        other => Err(format!("writer_id is {other:?}, expected a string")),
    }
}

fn integer(field: Field) -> Result<i64, String> {
    match field {
        Field::Long(v) => Ok(v),
        Field::Int(v) => Ok(i64::from(v)),
        Field::Short(v) => Ok(i64::from(v)),
        Field::Byte(v) => Ok(i64::from(v)),
        Field::ULong(v) => i64::try_from(v).map_err(|_| format!("character {v} too large")),
        Field::UInt(v) => Ok(i64::from(v)),
        Field::UShort(v) => Ok(i64::from(v)),
        Field::UByte(v) => Ok(i64::from(v)),
        other => Err(format!("character is {other:?}, expected an integer")),
    }
}

/// `(relative path, sha256, bytes)` of every shard file written.
type Sums = Vec<(String, String, u64)>;

/// Write all shards (train and test), several at a time.
fn write_shards(
    root: &Path,
    images: &[u8],
    shards: &[&[(String, Acc)]],
    polarity: Polarity,
    progress: bool,
) -> Result<Sums, DownloadError> {
    let table = float_table(polarity);
    let bar = count_bar(shards.len() as u64, "writing shards", progress);
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(shards.len())
        .max(1);
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Result<Sums, DownloadError>>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(shard) = shards.get(i) else { break };
                    let r = write_shard(root, images, i, shard, &table);
                    bar.inc(1);
                    let failed = r.is_err();
                    results.lock().expect("no panics hold this lock").push(r);
                    if failed {
                        // Let the other threads stop early too.
                        next.store(shards.len(), Ordering::Relaxed);
                        break;
                    }
                }
            });
        }
    });
    bar.finish_and_clear();
    let mut out = Vec::new();
    for r in results.into_inner().expect("threads joined") {
        out.extend(r?);
    }
    out.sort();
    Ok(out)
}

/// The text of each pixel value as written: Python's `repr` of `k/255` (which Rust's
/// `{:?}` of the same `f64` reproduces), indexed by the source pixel.
fn float_table(polarity: Polarity) -> Vec<String> {
    (0..=255u8)
        .map(|k| {
            let v = match polarity {
                Polarity::AsIs => k,
                Polarity::Inverted => 255 - k,
            };
            format!("{:?}", f64::from(v) / 255.0)
        })
        .collect()
}

/// Write `train/shard_NNN.json.gz` and `test/shard_NNN.json.gz` for one shard.
fn write_shard(
    root: &Path,
    images: &[u8],
    index: usize,
    writers: &[(String, Acc)],
    table: &[String],
) -> Result<Sums, DownloadError> {
    let mut sums = Vec::new();
    for (split, is_train) in [("train", true), ("test", false)] {
        // (id, acc, sample indices) of the writers with samples in this split.
        let parts: Vec<(&str, &Acc, Vec<usize>)> = writers
            .iter()
            .filter_map(|(id, acc)| {
                let n = acc.labels.len();
                let (n_train, _) = split_sizes(n);
                let mut order = shuffled_indices(n, writer_seed(id));
                let picked = if is_train {
                    order.truncate(n_train);
                    order
                } else {
                    order.split_off(n_train)
                };
                (!picked.is_empty()).then_some((id.as_str(), acc, picked))
            })
            .collect();
        let rel = format!("{split}/{}", shard_name(index));
        let path = root.join(&rel);
        let file = File::create(&path).map_err(io_err(&path))?;
        let hashing = HashWriter {
            inner: BufWriter::new(file),
            hasher: Sha256::new(),
            bytes: 0,
        };
        // Level 6, not the shared set's 9: measured about twice as fast on a shard for
        // files about 5 % larger, which matters over ~3.6 GB of JSON.
        let gz = GzBuilder::new()
            .mtime(0)
            .write(hashing, Compression::new(6));
        let mut out = BufWriter::with_capacity(1 << 16, gz);
        write_leaf_json(&mut out, images, &parts, table).map_err(io_err(&path))?;
        let gz = out.into_inner().map_err(|e| DownloadError::Io {
            path: path.clone(),
            source: e.into_error(),
        })?;
        let mut hashing = gz.finish().map_err(io_err(&path))?;
        hashing.inner.flush().map_err(io_err(&path))?;
        sums.push((rel, hex(&hashing.hasher.finalize()), hashing.bytes));
    }
    Ok(sums)
}

/// One compact LEAF JSON object for `parts`.
fn write_leaf_json(
    w: &mut impl Write,
    images: &[u8],
    parts: &[(&str, &Acc, Vec<usize>)],
    table: &[String],
) -> std::io::Result<()> {
    let quoted: Vec<String> = parts
        .iter()
        .map(|(id, _, _)| serde_json::to_string(id).expect("strings serialize"))
        .collect();
    w.write_all(b"{\"users\":[")?;
    w.write_all(quoted.join(",").as_bytes())?;
    w.write_all(b"],\"num_samples\":[")?;
    let counts: Vec<String> = parts.iter().map(|(_, _, p)| p.len().to_string()).collect();
    w.write_all(counts.join(",").as_bytes())?;
    w.write_all(b"],\"user_data\":{")?;
    for (i, ((_, acc, picked), q)) in parts.iter().zip(&quoted).enumerate() {
        if i > 0 {
            w.write_all(b",")?;
        }
        w.write_all(q.as_bytes())?;
        w.write_all(b":{\"x\":[")?;
        for (j, &s) in picked.iter().enumerate() {
            w.write_all(if j > 0 { b",[" } else { b"[" })?;
            let r = acc.rows[s];
            let img = &images[r * IMAGE_PIXELS..(r + 1) * IMAGE_PIXELS];
            for (k, &px) in img.iter().enumerate() {
                if k > 0 {
                    w.write_all(b",")?;
                }
                w.write_all(table[usize::from(px)].as_bytes())?;
            }
            w.write_all(b"]")?;
        }
        w.write_all(b"],\"y\":[")?;
        let ys: Vec<String> = picked.iter().map(|&s| acc.labels[s].to_string()).collect();
        w.write_all(ys.join(",").as_bytes())?;
        w.write_all(b"]}")?;
    }
    w.write_all(b"}}")
}

/// A writer that hashes and counts what passes through.
struct HashWriter<W> {
    inner: W,
    hasher: Sha256,
    bytes: u64,
}

impl<W: Write> Write for HashWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_match_python_repr() {
        let t = float_table(Polarity::AsIs);
        assert_eq!(t[255], "1.0");
        assert_eq!(t[0], "0.0");
        assert_eq!(t[254], "0.996078431372549");
        assert_eq!(t[1], "0.00392156862745098");
        let inv = float_table(Polarity::Inverted);
        assert_eq!(inv[0], "1.0");
        assert_eq!(inv[1], "0.996078431372549");
        // Every value reads back to its k.
        for (k, s) in t.iter().enumerate() {
            let v: f64 = s.parse().unwrap();
            assert_eq!((v * 255.0).round() as usize, k);
        }
    }

    #[test]
    fn split_rule() {
        assert_eq!(split_sizes(0), (0, 0));
        assert_eq!(split_sizes(1), (1, 0));
        assert_eq!(split_sizes(2), (1, 1));
        assert_eq!(split_sizes(10), (9, 1));
        assert_eq!(split_sizes(19), (17, 2));
        assert_eq!(split_sizes(315), (283, 32));
    }

    #[test]
    fn fnv1a_reference_values() {
        assert_eq!(writer_seed(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(writer_seed("a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(writer_seed("foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn polarity_from_border() {
        let mut light = vec![255u8; IMAGE_PIXELS];
        light[14 * SIDE + 14] = 0;
        let dark: Vec<u8> = light.iter().map(|&p| 255 - p).collect();
        assert_eq!(detect_polarity(&light).polarity, Polarity::AsIs);
        let d = detect_polarity(&dark);
        assert_eq!(d.polarity, Polarity::Inverted);
        assert_eq!(d.border_mean, 0.0);
        assert_eq!(d.images, 1);
        assert_eq!(detect_polarity(&[]).polarity, Polarity::AsIs);
    }
}
