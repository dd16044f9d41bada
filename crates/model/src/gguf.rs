//! GGUF, llama.cpp's single-file model format: a header, typed metadata (architecture sizes,
//! the tokenizer's vocabulary and merges, the chat template), a tensor table, then the tensor
//! data, each tensor in one of ggml's block formats.
//!
//! ```text
//! "GGUF" u32 version | u64 tensors | u64 metadata entries
//! metadata:  string key, u32 type, value            (strings: u64 length + UTF-8 bytes)
//! tensors:   string name, u32 dims, u64 ne[dims], u32 ggml type, u64 offset
//! padding to `general.alignment` (32), then the data; offsets are relative to its start
//! ```
//! `ne[0]` is the innermost dimension: a PyTorch `[out, in]` weight is `ne = [in, out]`.
//! [`Gguf::dequantize`] turns any supported block format into `f32` (the layouts follow
//! llama.cpp's `ggml-quants.c`: `Q4_0`, `Q5_0`, `Q8_0` in blocks of 32 with an f16 scale;
//! the k-quants `Q4_K`, `Q5_K`, `Q6_K` in super-blocks of 256 with 6- or 8-bit sub-block
//! scales).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use half::{bf16, f16};

#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    #[error("{path}: {message}")]
    Io { path: String, message: String },
    #[error("{path}: not a GGUF file ({message})")]
    Format { path: String, message: String },
    #[error("{path}: metadata {key}: {message}")]
    Metadata { path: String, key: String, message: String },
    #[error("{path}: tensor {name}: {message}")]
    Tensor { path: String, name: String, message: String },
}

/// A metadata value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    U64(u64),
    I64(i64),
    F32(f32),
    F64(f64),
    Bool(bool),
    String(String),
    Array(Vec<Value>),
}

impl Value {
    /// Any integer type as u64 (negative ones are `None`).
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U8(v) => Some(v.into()),
            Value::U16(v) => Some(v.into()),
            Value::U32(v) => Some(v.into()),
            Value::U64(v) => Some(v),
            Value::I8(v) => u64::try_from(v).ok(),
            Value::I16(v) => u64::try_from(v).ok(),
            Value::I32(v) => u64::try_from(v).ok(),
            Value::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::F32(v) => Some(v.into()),
            Value::F64(v) => Some(v),
            _ => self.as_u64().map(|v| v as f64),
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(b) => Some(b),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }
}

/// ggml's tensor types that docpipe reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GgmlType {
    F32,
    F16,
    BF16,
    Q4_0,
    Q5_0,
    Q8_0,
    Q4K,
    Q5K,
    Q6K,
}

impl GgmlType {
    fn from_id(id: u32) -> Option<Self> {
        Some(match id {
            0 => Self::F32,
            1 => Self::F16,
            2 => Self::Q4_0,
            6 => Self::Q5_0,
            8 => Self::Q8_0,
            12 => Self::Q4K,
            13 => Self::Q5K,
            14 => Self::Q6K,
            30 => Self::BF16,
            _ => return None,
        })
    }

    /// Values per block and bytes per block.
    pub fn block(self) -> (usize, usize) {
        match self {
            Self::F32 => (1, 4),
            Self::F16 | Self::BF16 => (1, 2),
            Self::Q4_0 => (32, 18),
            Self::Q5_0 => (32, 22),
            Self::Q8_0 => (32, 34),
            Self::Q4K => (256, 144),
            Self::Q5K => (256, 176),
            Self::Q6K => (256, 210),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::F32 => "F32",
            Self::F16 => "F16",
            Self::BF16 => "BF16",
            Self::Q4_0 => "Q4_0",
            Self::Q5_0 => "Q5_0",
            Self::Q8_0 => "Q8_0",
            Self::Q4K => "Q4_K",
            Self::Q5K => "Q5_K",
            Self::Q6K => "Q6_K",
        }
    }
}

/// One entry of the tensor table.
#[derive(Debug, Clone)]
pub struct TensorInfo {
    pub name: String,
    /// ggml order: `dims[0]` is the innermost (contiguous) dimension.
    pub dims: Vec<u64>,
    pub kind: GgmlType,
    /// From the start of the data section.
    pub offset: u64,
}

impl TensorInfo {
    pub fn elements(&self) -> u64 {
        self.dims.iter().product()
    }

    /// Bytes of the tensor's data.
    pub fn bytes(&self) -> u64 {
        let (per_block, block_bytes) = self.kind.block();
        self.elements() / per_block as u64 * block_bytes as u64
    }

    /// The PyTorch shape: outermost first.
    pub fn shape(&self) -> Vec<i64> {
        self.dims.iter().rev().map(|&d| d as i64).collect()
    }
}

/// An opened GGUF file: its metadata and tensor table; data is read on demand.
pub struct Gguf {
    path: PathBuf,
    pub version: u32,
    pub metadata: BTreeMap<String, Value>,
    pub tensors: Vec<TensorInfo>,
    data_start: u64,
}

/// Limits that keep a corrupt header from asking for absurd allocations.
const MAX_STRING: u64 = 1 << 26;
const MAX_ARRAY: u64 = 1 << 26;
const MAX_DIMS: u32 = 4;

struct Header<R> {
    r: R,
    path: String,
}

impl<R: Read> Header<R> {
    fn bad(&self, message: impl Into<String>) -> GgufError {
        GgufError::Format { path: self.path.clone(), message: message.into() }
    }

    fn bytes<const N: usize>(&mut self) -> Result<[u8; N], GgufError> {
        let mut b = [0u8; N];
        self.r.read_exact(&mut b).map_err(|e| self.bad(format!("truncated header: {e}")))?;
        Ok(b)
    }

    fn u32(&mut self) -> Result<u32, GgufError> {
        Ok(u32::from_le_bytes(self.bytes()?))
    }

    fn u64(&mut self) -> Result<u64, GgufError> {
        Ok(u64::from_le_bytes(self.bytes()?))
    }

    fn string(&mut self) -> Result<String, GgufError> {
        let n = self.u64()?;
        if n > MAX_STRING {
            return Err(self.bad(format!("string of {n} bytes")));
        }
        let mut b = vec![0u8; n as usize];
        self.r.read_exact(&mut b).map_err(|e| self.bad(format!("truncated string: {e}")))?;
        String::from_utf8(b).map_err(|_| self.bad("string not UTF-8"))
    }

    fn value(&mut self, ty: u32) -> Result<Value, GgufError> {
        Ok(match ty {
            0 => Value::U8(u8::from_le_bytes(self.bytes()?)),
            1 => Value::I8(i8::from_le_bytes(self.bytes()?)),
            2 => Value::U16(u16::from_le_bytes(self.bytes()?)),
            3 => Value::I16(i16::from_le_bytes(self.bytes()?)),
            4 => Value::U32(self.u32()?),
            5 => Value::I32(i32::from_le_bytes(self.bytes()?)),
            6 => Value::F32(f32::from_le_bytes(self.bytes()?)),
            7 => Value::Bool(self.bytes::<1>()?[0] != 0),
            8 => Value::String(self.string()?),
            9 => {
                let inner = self.u32()?;
                let n = self.u64()?;
                if n > MAX_ARRAY || inner == 9 {
                    return Err(self.bad(format!("array of {n} values of type {inner}")));
                }
                let mut v = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    v.push(self.value(inner)?);
                }
                Value::Array(v)
            }
            10 => Value::U64(self.u64()?),
            11 => Value::I64(i64::from_le_bytes(self.bytes()?)),
            12 => Value::F64(f64::from_le_bytes(self.bytes()?)),
            t => return Err(self.bad(format!("unknown metadata type {t}"))),
        })
    }
}

impl Gguf {
    pub fn open(path: &Path) -> Result<Self, GgufError> {
        Self::parse(path, true)
    }

    /// The header alone (metadata and tensor table), without checking that the tensors' data
    /// is in the file: for a header copied without its data (`decode_bench skeleton`).
    pub fn open_header(path: &Path) -> Result<Self, GgufError> {
        Self::parse(path, false)
    }

    /// Where the data section starts, in bytes from the start of the file; a tensor's
    /// [`TensorInfo::offset`] counts from there.
    pub fn data_start(&self) -> u64 {
        self.data_start
    }

    fn parse(path: &Path, with_data: bool) -> Result<Self, GgufError> {
        let shown = path.display().to_string();
        let io = |e: std::io::Error| GgufError::Io { path: shown.clone(), message: e.to_string() };
        let file = File::open(path).map_err(io)?;
        let file_len = file.metadata().map_err(io)?.len();
        let mut h = Header { r: BufReader::with_capacity(1 << 20, file), path: shown.clone() };
        if &h.bytes::<4>()? != b"GGUF" {
            return Err(h.bad("no GGUF magic"));
        }
        let version = h.u32()?;
        if !(2..=3).contains(&version) {
            return Err(h.bad(format!("version {version}, expected 2 or 3")));
        }
        let (n_tensors, n_kv) = (h.u64()?, h.u64()?);
        if n_tensors > MAX_ARRAY || n_kv > MAX_ARRAY {
            return Err(h.bad(format!("{n_tensors} tensors, {n_kv} metadata entries")));
        }
        let mut metadata = BTreeMap::new();
        for _ in 0..n_kv {
            let key = h.string()?;
            let ty = h.u32()?;
            let value = h.value(ty)?;
            metadata.insert(key, value);
        }
        let mut tensors = Vec::with_capacity(n_tensors as usize);
        for _ in 0..n_tensors {
            let name = h.string()?;
            let n_dims = h.u32()?;
            if n_dims == 0 || n_dims > MAX_DIMS {
                return Err(h.bad(format!("tensor {name} has {n_dims} dimensions")));
            }
            let dims = (0..n_dims).map(|_| h.u64()).collect::<Result<Vec<_>, _>>()?;
            let id = h.u32()?;
            let kind = GgmlType::from_id(id).ok_or_else(|| GgufError::Tensor {
                path: shown.clone(),
                name: name.clone(),
                message: format!("ggml type {id} is not supported"),
            })?;
            let offset = h.u64()?;
            tensors.push(TensorInfo { name, dims, kind, offset });
        }
        let alignment = metadata.get("general.alignment").and_then(Value::as_u64).unwrap_or(32).max(1);
        let pos = h.r.stream_position().map_err(io)?;
        let data_start = pos.div_ceil(alignment) * alignment;
        let g = Self { path: path.to_path_buf(), version, metadata, tensors, data_start };
        for t in &g.tensors {
            let (per_block, _) = t.kind.block();
            if t.dims[0] % per_block as u64 != 0 {
                return Err(
                    g.tensor_err(&t.name, format!("row of {} values, not whole {} blocks", t.dims[0], t.kind.name()))
                );
            }
            if with_data && g.data_start + t.offset + t.bytes() > file_len {
                return Err(g.tensor_err(&t.name, format!("data runs past the end of the file ({file_len} bytes)")));
            }
        }
        Ok(g)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn tensor_err(&self, name: &str, message: String) -> GgufError {
        GgufError::Tensor { path: self.path.display().to_string(), name: name.into(), message }
    }

    fn meta_err(&self, key: &str, message: &str) -> GgufError {
        GgufError::Metadata { path: self.path.display().to_string(), key: key.into(), message: message.into() }
    }

    fn need(&self, key: &str) -> Result<&Value, GgufError> {
        self.metadata.get(key).ok_or_else(|| self.meta_err(key, "missing"))
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.metadata.get(key)
    }

    pub fn u64(&self, key: &str) -> Result<u64, GgufError> {
        self.need(key)?.as_u64().ok_or_else(|| self.meta_err(key, "not an unsigned integer"))
    }

    pub fn f64(&self, key: &str) -> Result<f64, GgufError> {
        self.need(key)?.as_f64().ok_or_else(|| self.meta_err(key, "not a number"))
    }

    pub fn str(&self, key: &str) -> Result<&str, GgufError> {
        self.need(key)?.as_str().ok_or_else(|| self.meta_err(key, "not a string"))
    }

    /// An array of strings (the vocabulary, the merges).
    pub fn strings(&self, key: &str) -> Result<Vec<&str>, GgufError> {
        let a = self.need(key)?.as_array().ok_or_else(|| self.meta_err(key, "not an array"))?;
        a.iter().map(|v| v.as_str().ok_or_else(|| self.meta_err(key, "not an array of strings"))).collect()
    }

    /// An array of integers.
    pub fn ints(&self, key: &str) -> Result<Vec<i64>, GgufError> {
        let a = self.need(key)?.as_array().ok_or_else(|| self.meta_err(key, "not an array"))?;
        a.iter()
            .map(|v| match *v {
                Value::I32(x) => Ok(x.into()),
                Value::I64(x) => Ok(x),
                ref v => v.as_u64().map(|x| x as i64).ok_or_else(|| self.meta_err(key, "not an array of integers")),
            })
            .collect()
    }

    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// The tensor's bytes as stored.
    pub fn read_raw(&self, t: &TensorInfo) -> Result<Vec<u8>, GgufError> {
        let io = |e: std::io::Error| self.tensor_err(&t.name, format!("reading its data: {e}"));
        let mut f = File::open(&self.path).map_err(io)?;
        f.seek(SeekFrom::Start(self.data_start + t.offset)).map_err(io)?;
        let mut buf = vec![0u8; t.bytes() as usize];
        f.read_exact(&mut buf).map_err(io)?;
        Ok(buf)
    }

    /// The tensor's values as f32, in storage order (row-major over [`TensorInfo::shape`]).
    pub fn dequantize(&self, t: &TensorInfo) -> Result<Vec<f32>, GgufError> {
        let mut out = vec![0f32; t.elements() as usize];
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        self.dequantize_to(t, &mut out, threads)?;
        Ok(out)
    }

    /// The tensor's values as f32 into `out` (exactly its element count), decoded on up to
    /// `threads` threads, each taking a run of whole blocks; a small tensor on one.
    pub fn dequantize_to(&self, t: &TensorInfo, out: &mut [f32], threads: usize) -> Result<(), GgufError> {
        if out.len() as u64 != t.elements() {
            return Err(self.tensor_err(&t.name, format!("{} values, not {}", t.elements(), out.len())));
        }
        let raw = self.read_raw(t)?;
        dequantize_into_par(t.kind, &raw, out, threads);
        Ok(())
    }
}

fn f16_at(b: &[u8], i: usize) -> f32 {
    f16::from_le_bytes([b[i], b[i + 1]]).to_f32()
}

/// [`dequantize_into`] split over `threads` threads, each taking a run of whole blocks.
fn dequantize_into_par(kind: GgmlType, raw: &[u8], out: &mut [f32], threads: usize) {
    // a small tensor (a norm, a bias) is not worth a thread
    const MIN_BLOCKS_PER_THREAD: usize = 4096;
    let (per_block, block_bytes) = kind.block();
    let blocks = raw.len() / block_bytes;
    if threads <= 1 || blocks < 2 * MIN_BLOCKS_PER_THREAD {
        return dequantize_into(kind, raw, out);
    }
    let each = blocks.div_ceil(threads);
    std::thread::scope(|s| {
        for (r, y) in raw.chunks(each * block_bytes).zip(out.chunks_mut(each * per_block)) {
            s.spawn(move || dequantize_into(kind, r, y));
        }
    });
}

/// Decode `raw` (whole blocks of `kind`) into `out` (`raw.len() / block bytes × block values`).
pub fn dequantize_into(kind: GgmlType, raw: &[u8], out: &mut [f32]) {
    let (per_block, block_bytes) = kind.block();
    debug_assert_eq!(raw.len() / block_bytes * per_block, out.len());
    for (b, y) in raw.chunks_exact(block_bytes).zip(out.chunks_exact_mut(per_block)) {
        match kind {
            GgmlType::F32 => y[0] = f32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            GgmlType::F16 => y[0] = f16_at(b, 0),
            GgmlType::BF16 => y[0] = bf16::from_le_bytes([b[0], b[1]]).to_f32(),
            GgmlType::Q4_0 => q4_0(b, y),
            GgmlType::Q5_0 => q5_0(b, y),
            GgmlType::Q8_0 => q8_0(b, y),
            GgmlType::Q4K => q4_k(b, y),
            GgmlType::Q5K => q5_k(b, y),
            GgmlType::Q6K => q6_k(b, y),
        }
    }
}

/// `d: f16, qs: [u8; 16]`: value `j` is `d · (nibble − 8)`, low nibbles first.
fn q4_0(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, 0);
    let qs = &b[2..18];
    for j in 0..16 {
        y[j] = d * ((qs[j] & 0x0f) as i32 - 8) as f32;
        y[j + 16] = d * ((qs[j] >> 4) as i32 - 8) as f32;
    }
}

/// `d: f16, qh: u32, qs: [u8; 16]`: a 5-bit value, its fifth bit from `qh`, minus 16.
fn q5_0(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, 0);
    let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
    let qs = &b[6..22];
    for j in 0..16 {
        let h0 = ((qh >> j) << 4) & 0x10;
        let h1 = (qh >> (j + 12)) & 0x10;
        y[j] = d * (((qs[j] as u32 & 0x0f) | h0) as i32 - 16) as f32;
        y[j + 16] = d * (((qs[j] as u32 >> 4) | h1) as i32 - 16) as f32;
    }
}

/// `d: f16, qs: [i8; 32]`.
fn q8_0(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, 0);
    for j in 0..32 {
        y[j] = d * (b[2 + j] as i8) as f32;
    }
}

/// Scale and min of sub-block `j` (0..8) from the 12 packed bytes of 6-bit values (k-quants).
pub(crate) fn scale_min_k4(j: usize, q: &[u8]) -> (f32, f32) {
    if j < 4 {
        ((q[j] & 63) as f32, (q[j + 4] & 63) as f32)
    } else {
        let sc = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
        let m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
        (sc as f32, m as f32)
    }
}

/// `Q4_K` is `d: f16, dmin: f16, scales: [u8; 12], qs: [u8; 128]`: 8 sub-blocks of 32, each
/// `d·scale · nibble − dmin·min`; a 64-value group takes low nibbles then high nibbles of the
/// same 32 bytes.
fn q4_k(b: &[u8], y: &mut [f32]) {
    k_quant(b, None, &b[16..144], y);
}

/// `Q5_K` is `Q4_K` with `qh: [u8; 32]` before `qs`: a fifth bit per value (bit `2g` of `qh[l]`
/// for the low nibbles of group `g`, bit `2g + 1` for the high ones).
fn q5_k(b: &[u8], y: &mut [f32]) {
    k_quant(b, Some(&b[16..48]), &b[48..176], y);
}

/// The 4- and 5-bit k-quants: scales and mins from the 12 bytes after `d` and `dmin`.
fn k_quant(b: &[u8], qh: Option<&[u8]>, qs: &[u8], y: &mut [f32]) {
    let (d, dmin) = (f16_at(b, 0), f16_at(b, 2));
    let scales = &b[4..16];
    let high = |l: usize, bit: usize| qh.map_or(0, |h| ((h[l] >> bit) & 1) << 4);
    for g in 0..4 {
        let q = &qs[32 * g..32 * g + 32];
        let (s1, m1) = scale_min_k4(2 * g, scales);
        let (s2, m2) = scale_min_k4(2 * g + 1, scales);
        let (d1, m1, d2, m2) = (d * s1, dmin * m1, d * s2, dmin * m2);
        let out = &mut y[64 * g..64 * g + 64];
        for l in 0..32 {
            out[l] = d1 * ((q[l] & 0x0f) | high(l, 2 * g)) as f32 - m1;
            out[l + 32] = d2 * ((q[l] >> 4) | high(l, 2 * g + 1)) as f32 - m2;
        }
    }
}

/// `ql: [u8; 128], qh: [u8; 64], scales: [i8; 16], d: f16`: 6-bit values (4 low bits from
/// `ql`, 2 high from `qh`) minus 32, 16 sub-blocks of 16 with an 8-bit scale each.
fn q6_k(b: &[u8], y: &mut [f32]) {
    let (ql, qh, sc) = (&b[0..128], &b[128..192], &b[192..208]);
    let d = f16_at(b, 208);
    for half in 0..2 {
        let (ql, qh, sc) = (&ql[64 * half..], &qh[32 * half..], &sc[8 * half..]);
        let out = &mut y[128 * half..128 * half + 128];
        for l in 0..32 {
            let is = l / 16;
            let q1 = ((ql[l] & 0x0f) | ((qh[l] & 3) << 4)) as i32 - 32;
            let q2 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) as i32 - 32;
            let q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i32 - 32;
            let q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i32 - 32;
            let s = |k: usize| d * (sc[is + k] as i8) as f32;
            out[l] = s(0) * q1 as f32;
            out[l + 32] = s(2) * q2 as f32;
            out[l + 64] = s(4) * q3 as f32;
            out[l + 96] = s(6) * q4 as f32;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f16b(x: f32) -> [u8; 2] {
        f16::from_f32(x).to_le_bytes()
    }

    #[test]
    fn q8_0_is_scale_times_int8() {
        let mut b = Vec::from(f16b(0.5));
        b.extend((0..32).map(|i| (i as i8 - 16) as u8));
        let mut y = [0f32; 32];
        dequantize_into(GgmlType::Q8_0, &b, &mut y);
        assert_eq!(y[0], -8.0);
        assert_eq!(y[31], 7.5);
    }

    #[test]
    fn q5_0_takes_the_fifth_bit_from_qh() {
        // every nibble 0xf; qh sets bit 0 (value 0) and bit 16 (value 16): 31 − 16 = 15
        let mut b = Vec::from(f16b(2.0));
        b.extend(0x0001_0001u32.to_le_bytes());
        b.extend([0xffu8; 16]);
        let mut y = [0f32; 32];
        dequantize_into(GgmlType::Q5_0, &b, &mut y);
        assert_eq!(y[0], 30.0);
        assert_eq!(y[1], -2.0);
        assert_eq!(y[16], 30.0);
        assert_eq!(y[17], -2.0);
    }

    #[test]
    fn q4_k_sub_block_scales_and_mins() {
        // sub-block 0: scale 1, min 2; sub-block 1 (high nibbles of the first 32 bytes): scale 3,
        // min 0; sub-block 4 packs its scale and min across bytes 0, 4 and 8
        let mut scales = [0u8; 12];
        scales[0] = 1;
        scales[4] = 2;
        scales[1] = 3;
        scales[8] = 0x25; // sub-block 4: low 4 bits of scale 5, low 4 bits of min 2
        scales[0] |= 1 << 6; // scale of sub-block 4 gains 16
        let mut b = Vec::from(f16b(1.0));
        b.extend(f16b(0.5));
        b.extend(scales);
        b.extend([0x73u8; 128]); // low nibble 3, high nibble 7
        let mut y = [0f32; 256];
        dequantize_into(GgmlType::Q4K, &b, &mut y);
        assert_eq!(y[0], 3.0 - 1.0);
        assert_eq!(y[32], 21.0);
        assert_eq!(y[128], 21.0 * 3.0 - 1.0);
    }

    #[test]
    fn q5_k_is_q4_k_plus_a_fifth_bit() {
        let mut scales = [0u8; 12];
        scales[0] = 2; // sub-block 0: scale 2, min 0
        scales[1] = 3; // sub-block 1: scale 3
        let mut q4 = Vec::from(f16b(1.0));
        q4.extend(f16b(0.0));
        q4.extend(scales);
        q4.extend([0x21u8; 128]); // low nibble 1, high nibble 2
        let mut q5 = q4[..16].to_vec();
        let mut qh = [0u8; 32];
        qh[0] = 0b01; // value 0 (low nibble of group 0) gains 16
        qh[1] = 0b10; // value 33 (high nibble of group 0) gains 16
        q5.extend(qh);
        q5.extend(&q4[16..]);
        let (mut y4, mut y5) = ([0f32; 256], [0f32; 256]);
        dequantize_into(GgmlType::Q4K, &q4, &mut y4);
        dequantize_into(GgmlType::Q5K, &q5, &mut y5);
        assert_eq!((y4[0], y5[0]), (2.0, 34.0));
        assert_eq!((y4[33], y5[33]), (6.0, 54.0));
        assert_eq!(y4[1], y5[1]);
        assert_eq!(y4[32], y5[32]);
    }

    #[test]
    fn q6_k_signed_six_bit_values() {
        let mut b = vec![0u8; 210];
        b[0] = 0x0f; // value 0: low bits 15, high bits from qh[0] & 3
        b[128] = 0b01; // → 16 + 15 = 31 → 31 − 32 = −1
        b[192] = 4; // scale of sub-block 0
        b[208..210].copy_from_slice(&f16b(0.25));
        let mut y = [0f32; 256];
        dequantize_into(GgmlType::Q6K, &b, &mut y);
        assert_eq!(y[0], -1.0);
        assert_eq!(y[1], -32.0);
        assert_eq!(y[32], 0.0); // scale of sub-block 2 is 0
    }

    #[test]
    fn dequantizing_in_parallel_gives_the_same_bits() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let raw: Vec<u8> = (0..10_000 * 144)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        let (mut one, mut three) = (vec![0f32; 10_000 * 256], vec![0f32; 10_000 * 256]);
        dequantize_into(GgmlType::Q4K, &raw, &mut one);
        dequantize_into_par(GgmlType::Q4K, &raw, &mut three, 3);
        assert!(one.iter().zip(&three).all(|(a, b)| a.to_bits() == b.to_bits()));
    }

    #[test]
    fn a_header_without_its_data_opens_only_as_a_header() {
        // version 3, one F32 tensor of 4 values at offset 0, no metadata
        let mut h = Vec::from(*b"GGUF");
        h.extend(3u32.to_le_bytes());
        h.extend(1u64.to_le_bytes());
        h.extend(0u64.to_le_bytes());
        h.extend(1u64.to_le_bytes());
        h.push(b'w');
        h.extend(1u32.to_le_bytes());
        h.extend(4u64.to_le_bytes());
        h.extend(0u32.to_le_bytes());
        h.extend(0u64.to_le_bytes());
        let dir = std::env::temp_dir().join(format!("gguf-header-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("header.gguf");
        std::fs::write(&p, &h).unwrap();
        assert!(Gguf::open(&p).err().unwrap().to_string().contains("past the end"));
        let g = Gguf::open_header(&p).unwrap();
        assert_eq!(g.data_start(), (h.len() as u64).div_ceil(32) * 32);
        assert_eq!(g.tensors[0].bytes(), 16);
        // with its data after the alignment padding it opens whole
        h.resize(g.data_start() as usize, 0);
        h.extend([0u8; 16]);
        std::fs::write(&p, &h).unwrap();
        assert_eq!(Gguf::open(&p).unwrap().tensors[0].name, "w");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_truncated_file_is_refused_with_its_path() {
        let dir = std::env::temp_dir().join(format!("gguf-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("cut.gguf");
        std::fs::write(&p, b"GGUF\x03\0\0\0\x01").unwrap();
        let e = Gguf::open(&p).err().unwrap().to_string();
        assert!(e.contains("cut.gguf") && e.contains("truncated"), "{e}");
        std::fs::write(&p, b"PK\x03\x04").unwrap();
        assert!(Gguf::open(&p).err().unwrap().to_string().contains("no GGUF magic"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
