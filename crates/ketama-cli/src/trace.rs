//! Request traces for `--simulate`, in the formats cache traces are
//! published in: `txt` (one key per line, what follows a tab ignored),
//! `csv` (libCacheSim's csv reader's options: which 1-based column holds
//! the key, the size, the time; a header line; the delimiter) and
//! `oracleGeneral` (libCacheSim's binary format: 24-byte little-endian
//! records `u32 time, u64 object id, u32 size, i64 next access`, the key
//! being the id in decimal). gzip and zstd files are read transparently,
//! known by their first bytes. Whatever cannot be read is refused naming
//! the line or the byte offset, never guessed at.
//!
//! Memory: every distinct key once, plus 4 bytes a request.

use std::collections::HashMap;
use std::io::Read as _;
use std::path::Path;

use anyhow::{bail, Context as _};
use clap::{Args, ValueEnum};

/// A trace's format (`--trace-format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// One key per line; what follows a tab is ignored.
    Txt,
    /// Delimited fields: see the --csv-* options.
    Csv,
    /// libCacheSim's 24-byte binary records.
    #[value(name = "oracleGeneral")]
    OracleGeneral,
}

/// How a csv trace is laid out (libCacheSim's csv reader's options).
#[derive(Args, Debug, Clone)]
pub struct CsvArgs {
    /// csv: the column (1-based) holding the key.
    #[arg(long, value_name = "N")]
    csv_key_col: Option<usize>,
    /// csv: the column (1-based) holding the object's size (checked to be
    /// a number).
    #[arg(long, value_name = "N")]
    csv_size_col: Option<usize>,
    /// csv: the column (1-based) holding the request's time (checked to
    /// be a number).
    #[arg(long, value_name = "N")]
    csv_time_col: Option<usize>,
    /// csv: the first line is a header.
    #[arg(long)]
    csv_header: bool,
    /// csv: the field delimiter.
    #[arg(long, value_name = "CHAR", default_value_t = ',')]
    csv_delimiter: char,
}

/// The workload: its distinct keys and the order they are asked in
/// (4 bytes a request, the keys stored once).
#[derive(Debug)]
pub struct Workload {
    /// Each distinct key.
    pub names: Vec<Vec<u8>>,
    /// Requests, as indexes into `names`.
    pub order: Vec<u32>,
    /// Whether the trace gave each request's object size.
    pub sized: bool,
}

impl Workload {
    /// The requests' keys, in order.
    #[cfg(test)]
    pub fn keys(&self) -> impl Iterator<Item = &[u8]> {
        self.order
            .iter()
            .map(|&i| self.names[i as usize].as_slice())
    }

    fn push(&mut self, index: &mut HashMap<Vec<u8>, u32>, key: &[u8]) {
        let next = self.names.len() as u32;
        let i = *index.entry(key.to_vec()).or_insert_with(|| {
            self.names.push(key.to_vec());
            next
        });
        self.order.push(i);
    }
}

/// The file's bytes, gunzipped or un-zstd'd when they say they are.
fn bytes_of(path: &Path) -> anyhow::Result<Vec<u8>> {
    let name = path.display();
    let raw = std::fs::read(path).with_context(|| format!("--trace {name}: cannot read"))?;
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    if raw.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        flate2::read::MultiGzDecoder::new(&raw[..])
            .read_to_end(&mut out)
            .with_context(|| format!("--trace {name}: a gzip file that does not decompress (truncated or corrupt) after {} bytes", out.len()))?;
        return Ok(out);
    }
    if raw.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        return zstd::stream::decode_all(&raw[..]).with_context(|| {
            format!("--trace {name}: a zstd file that does not decompress (truncated or corrupt)")
        });
    }
    if matches!(ext, "gz" | "zst") {
        bail!(
            "--trace {name}: named .{ext} but not {} (its first bytes are {:02x?})",
            if ext == "gz" { "gzip" } else { "zstd" },
            &raw[..raw.len().min(4)]
        );
    }
    Ok(raw)
}

/// Reads a trace: `format` `None` is `txt`, refusing text that looks like
/// csv or binary (say `--trace-format txt` to read such keys anyway).
pub fn read(path: &Path, format: Option<Format>, csv: &CsvArgs) -> anyhow::Result<Workload> {
    let data = bytes_of(path)?;
    let name = path.display().to_string();
    let w = match format.unwrap_or(Format::Txt) {
        Format::Txt => txt(&name, &data, format.is_none())?,
        Format::Csv => csv_trace(&name, &data, csv)?,
        Format::OracleGeneral => oracle_general(&name, &data)?,
    };
    if w.order.is_empty() {
        bail!("--trace {name}: no requests in it");
    }
    Ok(w)
}

fn lines(data: &[u8]) -> impl Iterator<Item = (usize, &[u8])> {
    data.split(|&b| b == b'\n')
        .enumerate()
        .map(|(i, l)| (i + 1, l.strip_suffix(b"\r").unwrap_or(l)))
        .filter(|(_, l)| !l.is_empty())
}

fn txt(name: &str, data: &[u8], sniff: bool) -> anyhow::Result<Workload> {
    if sniff {
        if let Some(at) = data.iter().position(|&b| b == 0) {
            bail!("--trace {name}: byte {at} is NUL: a binary trace? Give --trace-format oracleGeneral (libCacheSim's 24-byte records), or --trace-format txt to read it as keys anyway");
        }
        let first: Vec<&[u8]> = lines(data).map(|(_, l)| l).take(1000).collect();
        let commas = |l: &[u8]| l.iter().filter(|&&b| b == b',').count();
        if let Some(f) = first.first() {
            let n = commas(f);
            if n > 0 && !f.contains(&b'\t') && first.iter().all(|l| commas(l) == n) {
                bail!("--trace {name}: line 1 looks like csv ({} fields separated by commas on every line): give --trace-format csv --csv-key-col N (and --csv-header if line 1 names the columns), or --trace-format txt to take whole lines as keys", n + 1);
            }
        }
    }
    let mut w = Workload {
        names: Vec::new(),
        order: Vec::new(),
        sized: false,
    };
    let mut index = HashMap::new();
    for (_, line) in lines(data) {
        let key = line.split(|&b| b == b'\t').next().unwrap_or(line);
        w.push(&mut index, key);
    }
    Ok(w)
}

/// One csv line's fields, `"` quoting as RFC 4180 (`""` inside quotes).
fn fields(line: &[u8], delim: u8) -> Result<Vec<Vec<u8>>, String> {
    let mut out = Vec::new();
    let mut i = 0;
    loop {
        let mut f = Vec::new();
        if line.get(i) == Some(&b'"') {
            i += 1;
            loop {
                match line.get(i) {
                    None => return Err("a quoted field is not closed".into()),
                    Some(b'"') if line.get(i + 1) == Some(&b'"') => {
                        f.push(b'"');
                        i += 2;
                    }
                    Some(b'"') => {
                        i += 1;
                        break;
                    }
                    Some(&b) => {
                        f.push(b);
                        i += 1;
                    }
                }
            }
            if i < line.len() && line[i] != delim {
                return Err(format!(
                    "text after a quoted field's closing quote, at byte {i}"
                ));
            }
        } else {
            while i < line.len() && line[i] != delim {
                f.push(line[i]);
                i += 1;
            }
        }
        out.push(f);
        if i >= line.len() {
            return Ok(out);
        }
        i += 1; // the delimiter
    }
}

fn csv_trace(name: &str, data: &[u8], a: &CsvArgs) -> anyhow::Result<Workload> {
    let Some(key_col) = a.csv_key_col else {
        bail!("--trace-format csv needs --csv-key-col N: the column (1-based) holding the key");
    };
    for (flag, col) in [
        ("--csv-key-col", Some(key_col)),
        ("--csv-size-col", a.csv_size_col),
        ("--csv-time-col", a.csv_time_col),
    ] {
        if col == Some(0) {
            bail!("{flag} 0: columns count from 1");
        }
    }
    if !a.csv_delimiter.is_ascii() {
        bail!("--csv-delimiter {:?}: one ASCII character", a.csv_delimiter);
    }
    let delim = a.csv_delimiter as u8;
    let mut w = Workload {
        names: Vec::new(),
        order: Vec::new(),
        sized: a.csv_size_col.is_some(),
    };
    let mut index = HashMap::new();
    for (n, line) in lines(data).skip(usize::from(a.csv_header)) {
        let f =
            fields(line, delim).map_err(|e| anyhow::anyhow!("--trace {name}: line {n}: {e}"))?;
        let get = |col: usize, flag: &str| -> anyhow::Result<&[u8]> {
            f.get(col - 1).map(Vec::as_slice).ok_or_else(|| {
                anyhow::anyhow!("--trace {name}: line {n} has {} fields: {flag} {col} is beyond them (is --csv-delimiter right?)", f.len())
            })
        };
        let key = get(key_col, "--csv-key-col")?;
        if key.is_empty() {
            bail!("--trace {name}: line {n}: the key (column {key_col}) is empty");
        }
        for (flag, col) in [
            ("--csv-size-col", a.csv_size_col),
            ("--csv-time-col", a.csv_time_col),
        ] {
            if let Some(c) = col {
                let v = get(c, flag)?;
                let text = String::from_utf8_lossy(v);
                if text.trim().parse::<f64>().is_err() {
                    let hint = if n == 1 && !a.csv_header {
                        " (a header? give --csv-header)"
                    } else {
                        ""
                    };
                    bail!("--trace {name}: line {n}: column {c} ({flag}) is {text:?}, not a number{hint}");
                }
            }
        }
        w.push(&mut index, key);
    }
    Ok(w)
}

/// libCacheSim's oracleGeneral record.
pub const ORACLE_RECORD: usize = 24;

fn oracle_general(name: &str, data: &[u8]) -> anyhow::Result<Workload> {
    if data.len() % ORACLE_RECORD != 0 {
        let at = data.len() - data.len() % ORACLE_RECORD;
        bail!("--trace {name}: {} bytes are not whole oracleGeneral records of {ORACLE_RECORD} bytes: the record at byte offset {at} is cut short (truncated, or not this format)", data.len());
    }
    let mut w = Workload {
        names: Vec::new(),
        order: Vec::with_capacity(data.len() / ORACLE_RECORD),
        sized: true,
    };
    let mut index = HashMap::new();
    let mut key = String::new();
    for rec in data.chunks_exact(ORACLE_RECORD) {
        let id = u64::from_le_bytes(rec[4..12].try_into().unwrap_or_default());
        key.clear();
        use std::fmt::Write as _;
        let _ = write!(key, "{id}");
        w.push(&mut index, key.as_bytes());
    }
    Ok(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn csv_args(key: usize) -> CsvArgs {
        CsvArgs {
            csv_key_col: Some(key),
            csv_size_col: Some(3),
            csv_time_col: Some(1),
            csv_header: true,
            csv_delimiter: ',',
        }
    }

    #[test]
    fn csv_columns_and_quotes() {
        let data = b"ts,key,size\n1,/a,10\n2,\"/b,c\",20\r\n3,/a,10\n";
        let w = csv_trace("t", data, &csv_args(2)).unwrap();
        let keys: Vec<&[u8]> = w.keys().collect();
        assert_eq!(keys, [&b"/a"[..], b"/b,c", b"/a"]);
        let no_header = CsvArgs {
            csv_header: false,
            ..csv_args(2)
        };
        let e = csv_trace("t", data, &no_header).unwrap_err().to_string();
        assert!(e.contains("line 1") && e.contains("--csv-header"), "{e}");
        let e = csv_trace("t", b"1,/a\n", &no_header)
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 1 has 2 fields"), "{e}");
    }

    #[test]
    fn txt_refuses_csv_and_binary_unless_told() {
        let e = txt("t", b"ts,key,size\n1,/a,10\n", true)
            .unwrap_err()
            .to_string();
        assert!(e.contains("looks like csv"), "{e}");
        assert!(txt("t", b"ts,key,size\n1,/a,10\n", false).is_ok());
        let e = txt("t", b"/a\n\0\0", true).unwrap_err().to_string();
        assert!(e.contains("byte 3 is NUL"), "{e}");
        // Keys with a comma here and there are keys.
        assert_eq!(txt("t", b"/a?x=1,2\n/b\n", true).unwrap().order.len(), 2);
    }

    #[test]
    fn oracle_general_records() {
        let mut data = Vec::new();
        for (t, id) in [(1u32, 7u64), (2, 9), (3, 7)] {
            data.extend(t.to_le_bytes());
            data.extend(id.to_le_bytes());
            data.extend(100u32.to_le_bytes());
            data.extend((-1i64).to_le_bytes());
        }
        let w = oracle_general("t", &data).unwrap();
        let keys: Vec<&[u8]> = w.keys().collect();
        assert_eq!(keys, [&b"7"[..], b"9", b"7"]);
        let e = oracle_general("t", &data[..50]).unwrap_err().to_string();
        assert!(e.contains("byte offset 48"), "{e}");
    }
}
