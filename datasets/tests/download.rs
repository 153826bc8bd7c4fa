//! `datasets::download` against a generated parquet fixture and a local HTTP server
//! (no network): conversion round trip, checksum mismatch, truncated transfer and
//! resume, the whole `download` run, and the `femnist download` binary.
#![cfg(feature = "download")]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use datasets::download::convert::{self, ConvertOptions, Polarity, writer_seed};
use datasets::download::{DownloadError, DownloadOptions, download, http};
use datasets::{Femnist, IMAGE_PIXELS, WriterSet, shuffled_indices};
use parquet::basic::Compression;
use parquet::data_type::{ByteArray, ByteArrayType, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;
use sha2::{Digest, Sha256};

const FILE: &str = "train-00000-of-00001.parquet";

/// A fresh empty directory, unique per test.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("venn-download-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// One source sample: writer, label, pixels in the project's convention (255 = white).
struct Sample {
    writer: String,
    label: u8,
    pixels: Vec<u8>,
}

/// 23 writers (two shards), 1 to 6 samples each (so some have no test part), rows in an
/// interleaved order; every image distinct.
fn fixture() -> Vec<Sample> {
    let mut out = Vec::new();
    for round in 0..6 {
        for w in (0..23).rev() {
            let n = w % 6 + 1;
            if round >= n {
                continue;
            }
            let id = format!("f{:04}_{:02}", 100 + w * 7, w % 50);
            let mut pixels = vec![255u8; IMAGE_PIXELS];
            // Ink in the middle, varying per sample; a border pixel slightly grey.
            for (k, p) in pixels.iter_mut().enumerate().skip(200).take(300) {
                *p = ((k * 31 + w * 17 + round * 101) % 256) as u8;
            }
            pixels[0] = 250 - round as u8;
            out.push(Sample {
                writer: id,
                label: ((w * 7 + round * 3) % 62) as u8,
                pixels,
            });
        }
    }
    out
}

/// A PNG of 28 × 28 pixels: gray, or RGB when `rgb`.
fn png(pixels: &[u8], rgb: bool) -> Vec<u8> {
    let mut out = Vec::new();
    let mut enc = png::Encoder::new(&mut out, 28, 28);
    enc.set_depth(png::BitDepth::Eight);
    if rgb {
        enc.set_color(png::ColorType::Rgb);
        let data: Vec<u8> = pixels.iter().flat_map(|&p| [p, p, p]).collect();
        let mut w = enc.write_header().unwrap();
        w.write_image_data(&data).unwrap();
    } else {
        enc.set_color(png::ColorType::Grayscale);
        let mut w = enc.write_header().unwrap();
        w.write_image_data(pixels).unwrap();
    }
    out
}

/// Write `samples` as a parquet file shaped like `flwrlabs/femnist`; `dark` stores the
/// images inverted (black background). Every fifth image is RGB.
fn write_parquet(path: &Path, samples: &[Sample], dark: bool) {
    let schema = parse_message_type(
        "message schema {
            optional group image {
                optional binary bytes;
                optional binary path (STRING);
            }
            optional binary writer_id (STRING);
            optional int64 hsf_id;
            optional int64 character;
        }",
    )
    .unwrap();
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .build();
    let file = std::fs::File::create(path).unwrap();
    let mut writer = SerializedFileWriter::new(file, Arc::new(schema), Arc::new(props)).unwrap();
    // Two row groups, to read across them.
    for chunk in samples.chunks(samples.len().div_ceil(2)) {
        let n = chunk.len();
        let images: Vec<ByteArray> = chunk
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let px: Vec<u8> = if dark {
                    s.pixels.iter().map(|&p| 255 - p).collect()
                } else {
                    s.pixels.clone()
                };
                ByteArray::from(png(&px, i % 5 == 4))
            })
            .collect();
        let writers: Vec<ByteArray> = chunk
            .iter()
            .map(|s| ByteArray::from(s.writer.as_str()))
            .collect();
        let hsf: Vec<i64> = chunk.iter().map(|_| 4).collect();
        let labels: Vec<i64> = chunk.iter().map(|s| i64::from(s.label)).collect();
        let mut rg = writer.next_row_group().unwrap();
        let mut col = 0;
        while let Some(mut c) = rg.next_column().unwrap() {
            match col {
                0 => {
                    c.typed::<ByteArrayType>()
                        .write_batch(&images, Some(&vec![2; n]), None)
                        .unwrap();
                }
                1 => {
                    // image.path is null: the group is present, the field is not.
                    c.typed::<ByteArrayType>()
                        .write_batch(&[], Some(&vec![1; n]), None)
                        .unwrap();
                }
                2 => {
                    c.typed::<ByteArrayType>()
                        .write_batch(&writers, Some(&vec![1; n]), None)
                        .unwrap();
                }
                3 => {
                    c.typed::<Int64Type>()
                        .write_batch(&hsf, Some(&vec![1; n]), None)
                        .unwrap();
                }
                _ => {
                    c.typed::<Int64Type>()
                        .write_batch(&labels, Some(&vec![1; n]), None)
                        .unwrap();
                }
            }
            c.close().unwrap();
            col += 1;
        }
        rg.close().unwrap();
    }
    writer.close().unwrap();
}

/// Per writer, the samples in file order: (pixels, label).
fn by_writer(samples: &[Sample]) -> BTreeMap<String, Vec<(Vec<u8>, u8)>> {
    let mut m: BTreeMap<String, Vec<(Vec<u8>, u8)>> = BTreeMap::new();
    for s in samples {
        m.entry(s.writer.clone())
            .or_default()
            .push((s.pixels.clone(), s.label));
    }
    m
}

/// `root` (a FEMNIST directory) holds exactly the fixture, split by the documented rule.
fn assert_matches_fixture(root: &Path, samples: &[Sample]) {
    let data = Femnist::load(root, WriterSet::Main).unwrap();
    let expected = by_writer(samples);
    let stats = data.stats();
    assert_eq!(stats.writers, expected.len());
    assert_eq!(stats.train_samples + stats.test_samples, samples.len());
    let classes: std::collections::BTreeSet<u8> = samples.iter().map(|s| s.label).collect();
    assert_eq!(stats.classes, classes.len());
    for (id, rows) in &expected {
        let n = rows.len();
        let n_train = (n * 9 / 10).max(1);
        let order = shuffled_indices(n, writer_seed(id));
        let (train, test) = data.partition(id);
        let train = train.expect("every writer has a train part");
        assert_eq!(train.len(), n_train, "{id}");
        assert_eq!(test.map_or(0, |t| t.len()), n - n_train, "{id}");
        for (j, &s) in order.iter().enumerate() {
            let (w, i) = if j < n_train {
                (train, j)
            } else {
                (test.unwrap(), j - n_train)
            };
            assert_eq!(w.image(i), &rows[s].0[..], "{id} sample {s}");
            assert_eq!(w.labels[i], rows[s].1, "{id} sample {s}");
        }
    }
}

/// Every file under `dir` (relative path → bytes).
fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn converter_round_trips_and_is_deterministic() {
    let dir = scratch("convert");
    let samples = fixture();
    let light = dir.join(FILE);
    write_parquet(&light, &samples, false);
    let opts = ConvertOptions {
        source_url: "http://example.invalid/datasets/flwrlabs/femnist".into(),
        source_repo: String::new(),
        quiet: true,
    };
    let a = dir.join("a/femnist");
    let report = convert::convert(std::slice::from_ref(&light), &a, &opts).unwrap();
    assert_eq!(report.rows, samples.len() as u64);
    assert_eq!(report.writers, 23);
    assert_eq!(report.shards, 2);
    assert_eq!(report.polarity.polarity, Polarity::AsIs);
    assert_matches_fixture(&a, &samples);

    let files = tree(&a);
    for f in [
        "train/shard_000.json.gz",
        "train/shard_001.json.gz",
        "test/shard_000.json.gz",
        "test/shard_001.json.gz",
        "writers.tsv",
        "SHA256SUMS",
        "SOURCE.json",
    ] {
        assert!(
            files.contains_key(f),
            "{f} missing; have {:?}",
            files.keys()
        );
    }
    assert_eq!(files.len(), 7);
    // SHA256SUMS lists every shard with its hash.
    let sums = String::from_utf8(files["SHA256SUMS"].clone()).unwrap();
    assert_eq!(sums.lines().count(), 4);
    for line in sums.lines() {
        let (sha, path) = line.split_once("  ./").unwrap();
        assert_eq!(sha, sha256_hex(&files[path]), "{path}");
    }
    let tsv = String::from_utf8(files["writers.tsv"].clone()).unwrap();
    assert_eq!(tsv.lines().count(), 24);
    assert!(
        tsv.lines()
            .nth(1)
            .unwrap()
            .ends_with("\tmain\tshard_000.json.gz\t1\t0\t1\tn/a\tflwrlabs/femnist"),
        "{tsv}"
    );
    let source: serde_json::Value = serde_json::from_slice(&files["SOURCE.json"]).unwrap();
    assert_eq!(source["polarity"]["polarity"], "as_is");
    assert_eq!(source["rows"], samples.len());
    assert_eq!(
        source["files"][0]["sha256"],
        sha256_hex(&std::fs::read(&light).unwrap())
    );

    // Same input, same bytes; converting over an existing directory replaces it.
    let b = dir.join("b/femnist");
    convert::convert(std::slice::from_ref(&light), &b, &opts).unwrap();
    assert_eq!(tree(&b), files);
    convert::convert(std::slice::from_ref(&light), &b, &opts).unwrap();
    assert_eq!(tree(&b), files);
    assert!(!dir.join("b/.femnist.partial").exists());
    assert!(!dir.join("b/.femnist.old").exists());

    // A dark-background source is detected and inverted back: the same shards.
    let dark = dir.join("dark").join(FILE);
    std::fs::create_dir_all(dark.parent().unwrap()).unwrap();
    write_parquet(&dark, &samples, true);
    let c = dir.join("c/femnist");
    let report = convert::convert(std::slice::from_ref(&dark), &c, &opts).unwrap();
    assert_eq!(report.polarity.polarity, Polarity::Inverted);
    assert!(report.polarity.border_mean < 64.0, "{:?}", report.polarity);
    let dark_files = tree(&c);
    for (name, bytes) in &files {
        if name.ends_with(".json.gz") || name == "SHA256SUMS" || name == "writers.tsv" {
            assert_eq!(&dark_files[name], bytes, "{name}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn decode_png_rejects_other_sizes_and_garbage() {
    // A 27 × 28 image is rejected with its size.
    let mut out = Vec::new();
    let mut enc = png::Encoder::new(&mut out, 27, 28);
    enc.set_color(png::ColorType::Grayscale);
    enc.set_depth(png::BitDepth::Eight);
    enc.write_header()
        .unwrap()
        .write_image_data(&[255; 27 * 28])
        .unwrap();
    assert!(
        convert::decode_png(&out)
            .unwrap_err()
            .contains("27x28, expected 28x28")
    );
    assert!(convert::decode_png(b"not a png").is_err());
}

#[test]
fn bad_label_names_the_file_and_row() {
    let dir = scratch("bad-label");
    let mut samples = fixture();
    samples[3].label = 99;
    let path = dir.join(FILE);
    write_parquet(&path, &samples, false);
    let dest = dir.join("out/femnist");
    let opts = ConvertOptions {
        quiet: true,
        ..ConvertOptions::default()
    };
    let err = convert::convert(std::slice::from_ref(&path), &dest, &opts).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains(FILE) && msg.contains("row 3") && msg.contains("label 99"),
        "{msg}"
    );
    // Nothing half-written where the loader looks.
    assert!(!dest.exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// What the local server was asked.
#[derive(Default)]
struct Seen {
    /// (path, Range header) per request.
    requests: Vec<(String, Option<String>)>,
}

/// A tiny HTTP/1.1 server standing in for Hugging Face: the tree listing, a redirect from
/// `resolve/main/...` to `/cdn/...`, and the file with `Range` support.
struct Server {
    base: String,
    seen: Arc<Mutex<Seen>>,
    /// Send only half of the next file body (with the full Content-Length), then close.
    truncate_next: Arc<Mutex<bool>>,
}

impl Server {
    fn start(file: Vec<u8>, advertised_sha: String) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Seen::default()));
        let truncate_next = Arc::new(Mutex::new(false));
        let listing = serde_json::json!([
            {"type": "file", "path": "data/README.txt", "size": 5, "oid": "0"},
            {"type": "file", "path": format!("data/{FILE}"), "size": file.len(),
             "oid": "0123456789abcdef0123456789abcdef01234567",
             "lfs": {"oid": advertised_sha, "size": file.len(), "pointerSize": 134}}
        ])
        .to_string();
        let file = Arc::new(file);
        let (s, t, b) = (seen.clone(), truncate_next.clone(), base.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (s, t, b, file, listing) = (
                    s.clone(),
                    t.clone(),
                    b.clone(),
                    file.clone(),
                    listing.clone(),
                );
                std::thread::spawn(move || {
                    let _ = serve(stream, &s, &t, &b, &file, &listing);
                });
            }
        });
        Server {
            base,
            seen,
            truncate_next,
        }
    }

    fn ranges(&self) -> Vec<Option<String>> {
        self.seen
            .lock()
            .unwrap()
            .requests
            .iter()
            .filter(|(p, _)| p.starts_with("/cdn/"))
            .map(|(_, r)| r.clone())
            .collect()
    }
}

fn serve(
    stream: TcpStream,
    seen: &Mutex<Seen>,
    truncate: &Mutex<bool>,
    base: &str,
    file: &[u8],
    listing: &str,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let path = line.split_whitespace().nth(1).unwrap_or("").to_owned();
    let mut range = None;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 || h.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':')
            && k.eq_ignore_ascii_case("range")
        {
            range = Some(v.trim().to_owned());
        }
    }
    seen.lock()
        .unwrap()
        .requests
        .push((path.clone(), range.clone()));
    let mut out = stream;
    let head = |status: &str, extra: &str, len: usize| {
        format!("HTTP/1.1 {status}\r\nContent-Length: {len}\r\nConnection: close\r\n{extra}\r\n")
    };
    if path == "/api/datasets/flwrlabs/femnist/tree/main/data" {
        out.write_all(
            head(
                "200 OK",
                "Content-Type: application/json\r\n",
                listing.len(),
            )
            .as_bytes(),
        )?;
        out.write_all(listing.as_bytes())?;
    } else if path == format!("/datasets/flwrlabs/femnist/resolve/main/data/{FILE}") {
        let loc = format!("Location: {base}/cdn/{FILE}\r\n");
        out.write_all(head("302 Found", &loc, 0).as_bytes())?;
    } else if path == format!("/cdn/{FILE}") {
        let start: usize = range
            .as_deref()
            .and_then(|r| r.strip_prefix("bytes="))
            .and_then(|r| r.strip_suffix('-'))
            .and_then(|r| r.parse().ok())
            .unwrap_or(0);
        if start >= file.len() {
            out.write_all(head("416 Range Not Satisfiable", "", 0).as_bytes())?;
            return Ok(());
        }
        let body = &file[start..];
        let header = if range.is_some() {
            let cr = format!(
                "Content-Range: bytes {start}-{}/{}\r\n",
                file.len() - 1,
                file.len()
            );
            head("206 Partial Content", &cr, body.len())
        } else {
            head("200 OK", "", body.len())
        };
        out.write_all(header.as_bytes())?;
        let cut = std::mem::take(&mut *truncate.lock().unwrap());
        if cut {
            out.write_all(&body[..body.len() / 2])?;
            out.flush()?;
            out.shutdown(std::net::Shutdown::Both)?;
            return Ok(());
        }
        out.write_all(body)?;
    } else {
        out.write_all(head("404 Not Found", "", 0).as_bytes())?;
    }
    out.flush()
}

/// A fixture parquet's bytes and SHA-256.
fn parquet_bytes(dir: &Path, samples: &[Sample]) -> (Vec<u8>, String) {
    let p = dir.join("fixture.parquet");
    write_parquet(&p, samples, false);
    let bytes = std::fs::read(&p).unwrap();
    std::fs::remove_file(&p).unwrap();
    let sha = sha256_hex(&bytes);
    (bytes, sha)
}

#[test]
fn checksum_mismatch_removes_the_part_file() {
    let dir = scratch("mismatch");
    let (bytes, _) = parquet_bytes(&dir, &fixture());
    let wrong = "ab".repeat(32);
    let server = Server::start(bytes, wrong.clone());
    let mut opts = DownloadOptions::new(dir.join("data"));
    opts.source_url = server.base.clone();
    opts.quiet = true;
    let err = download(&opts).unwrap_err();
    assert!(matches!(err, DownloadError::Checksum { .. }), "{err}");
    let msg = err.to_string();
    assert!(msg.contains(&wrong) && msg.contains(FILE), "{msg}");
    let downloads = dir.join("data/downloads");
    assert!(!downloads.join(FILE).exists());
    assert!(!downloads.join(format!("{FILE}.part")).exists());
    assert!(!dir.join("data/femnist").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn truncated_transfer_keeps_the_part_and_resumes() {
    let dir = scratch("truncated");
    let (bytes, sha) = parquet_bytes(&dir, &fixture());
    let len = bytes.len() as u64;
    let server = Server::start(bytes.clone(), sha.clone());
    *server.truncate_next.lock().unwrap() = true;
    let url = format!(
        "{}/datasets/flwrlabs/femnist/resolve/main/data/{FILE}",
        server.base
    );
    let downloads = dir.join("downloads");
    let err = http::fetch(&url, &downloads, FILE, len, &sha, false).unwrap_err();
    assert!(matches!(err, DownloadError::Truncated { .. }), "{err}");
    assert!(err.to_string().contains("rerun to resume"), "{err}");
    let part = downloads.join(format!("{FILE}.part"));
    let half = len - len.div_ceil(2);
    assert_eq!(std::fs::metadata(&part).unwrap().len(), half);
    assert!(!downloads.join(FILE).exists());

    let got = http::fetch(&url, &downloads, FILE, len, &sha, false).unwrap();
    assert!(got.resumed && !got.reused);
    assert_eq!(got.transferred, len - half);
    assert_eq!(std::fs::read(&got.path).unwrap(), bytes);
    assert!(!part.exists());
    assert_eq!(
        server.ranges(),
        vec![None, Some(format!("bytes={half}-"))],
        "the rerun asks for the rest"
    );
    // Already there and verified: not fetched again.
    let again = http::fetch(&url, &downloads, FILE, len, &sha, false).unwrap();
    assert!(again.reused);
    assert_eq!(server.ranges().len(), 2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn download_end_to_end() {
    let dir = scratch("e2e");
    let samples = fixture();
    let (bytes, sha) = parquet_bytes(&dir, &samples);
    let server = Server::start(bytes, sha.clone());
    let data = dir.join("data");
    let mut opts = DownloadOptions::new(&data);
    opts.source_url = format!("{}/", server.base);
    opts.quiet = true;
    let report = download(&opts).unwrap();
    assert_eq!(report.femnist_dir, data.join("femnist"));
    assert_eq!(report.files.len(), 1);
    assert_eq!(report.files[0].path, format!("data/{FILE}"));
    assert_eq!(report.files[0].sha256, sha);
    assert_eq!(report.fetched_bytes, report.source_bytes);
    assert_matches_fixture(&data.join("femnist"), &samples);
    // The source is deleted, and with it the empty downloads/.
    assert!(!data.join("downloads").exists());
    let source: serde_json::Value =
        serde_json::from_slice(&std::fs::read(data.join("femnist/SOURCE.json")).unwrap()).unwrap();
    assert_eq!(
        source["source"],
        format!("{}/datasets/flwrlabs/femnist", server.base)
    );

    // --keep-source keeps it, and the layout is found by `locate` from `data`.
    opts.keep_source = true;
    download(&opts).unwrap();
    assert!(data.join("downloads").join(FILE).is_file());
    assert_eq!(datasets::locate(Some(&data)).unwrap(), data.join("femnist"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[cfg(feature = "cli")]
#[test]
fn binary_download_prints_stats() {
    let dir = scratch("bin");
    let samples = fixture();
    let (bytes, sha) = parquet_bytes(&dir, &samples);
    let server = Server::start(bytes, sha);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_femnist"))
        .arg("download")
        .arg("--dir")
        .arg(dir.join("data"))
        .args(["--source-url", &server.base, "--quiet"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stats: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    let expected = Femnist::load(&dir.join("data/femnist"), WriterSet::Main)
        .unwrap()
        .stats();
    assert_eq!(stats, serde_json::to_value(&expected).unwrap());
    assert_eq!(stats["writers"], 23);
    assert_eq!(
        stats["train_samples"].as_u64().unwrap() + stats["test_samples"].as_u64().unwrap(),
        samples.len() as u64
    );
    assert!(stderr.contains("23 writers"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A measurement, not a check of speed (run by hand; the figures are in the README's "More
/// data"): the shared main set (63,351 real samples) written as a `flwrlabs/femnist`-shaped
/// parquet, converted, and loaded back. Prints rows/s and sizes, and the time the full
/// 814,277 rows would take at that rate; asserts only that real data round-trips exactly.
#[test]
#[ignore = "measurement on ../shared/data/femnist: cargo test --release -p datasets --test download -- --ignored --nocapture"]
fn conversion_speed_on_the_shared_set() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/femnist");
    if !root.join("train").is_dir() {
        eprintln!("SKIPPED: no shared FEMNIST at {}", root.display());
        return;
    }
    let data = Femnist::load(&root, WriterSet::Main).unwrap();
    let samples: Vec<Sample> = data
        .train
        .iter()
        .chain(&data.test)
        .flat_map(|w| {
            (0..w.len()).map(move |i| Sample {
                writer: w.id.clone(),
                label: w.labels[i],
                pixels: w.image(i).to_vec(),
            })
        })
        .collect();
    let dir = scratch("speed");
    let file = dir.join(FILE);
    write_parquet(&file, &samples, false);
    let opts = ConvertOptions {
        source_url: "http://example.invalid/datasets/flwrlabs/femnist".into(),
        source_repo: String::new(),
        quiet: true,
    };
    let out = dir.join("femnist");
    let t = std::time::Instant::now();
    let report = convert::convert(std::slice::from_ref(&file), &out, &opts).unwrap();
    let secs = t.elapsed().as_secs_f64();
    let rate = report.rows as f64 / secs;
    let mb = |b: u64| b as f64 / 1e6;
    println!(
        "converted {} rows of {} writers in {secs:.1} s ({rate:.0} rows/s, {} threads): \
         parquet {:.1} MB -> {} shards {:.1} MB; full 814,277 rows at this rate: {:.0} s",
        report.rows,
        report.writers,
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        mb(std::fs::metadata(&file).unwrap().len()),
        report.shards,
        mb(report.shard_bytes),
        814_277.0 / rate,
    );
    let back = Femnist::load(&out, WriterSet::Main).unwrap();
    let mut got: BTreeMap<String, Vec<(Vec<u8>, u8)>> = BTreeMap::new();
    for w in back.train.iter().chain(&back.test) {
        for i in 0..w.len() {
            got.entry(w.id.clone())
                .or_default()
                .push((w.image(i).to_vec(), w.labels[i]));
        }
    }
    let mut want = by_writer(&samples);
    for v in got.values_mut().chain(want.values_mut()) {
        v.sort();
    }
    assert_eq!(got, want, "real FEMNIST does not round-trip exactly");
}
