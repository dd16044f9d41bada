//! Where the model runs: `cpu`, `cuda[:N]` or `auto`, and in which precision.
//!
//! libtorch's CUDA kernels live in `libtorch_cuda.so`, which nothing in the binary references
//! directly, so the linker leaves it out. [`load_cuda`] `dlopen`s it (next to the
//! `libtorch_cpu.so` this process already mapped) before the first tch call; without that,
//! CUDA would silently never be used.

use std::str::FromStr;

use docpipe_ops::metrics::process_memory;
use tch::Device;

use crate::Precision;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceChoice {
    Auto,
    Cpu,
    Cuda(usize),
}

impl FromStr for DeviceChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Self::Auto),
            "cpu" => Ok(Self::Cpu),
            "cuda" => Ok(Self::Cuda(0)),
            _ => match s.strip_prefix("cuda:").map(str::parse) {
                Some(Ok(n)) => Ok(Self::Cuda(n)),
                _ => Err(format!("unknown device {s:?} (expected auto, cpu, cuda or cuda:N)")),
            },
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    #[error("CUDA was requested but is not available: {0}")]
    NoCuda(String),
    #[error("{0}")]
    Invalid(String),
}

/// Try to make libtorch's CUDA backend available; returns why not on failure.
pub fn load_cuda() -> Result<(), String> {
    let maps = std::fs::read_to_string("/proc/self/maps").map_err(|e| e.to_string())?;
    let cpu_lib = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| p.ends_with("/libtorch_cpu.so"))
        .ok_or("libtorch_cpu.so is not mapped")?;
    let cuda_lib = std::path::Path::new(cpu_lib).with_file_name("libtorch_cuda.so");
    if !cuda_lib.exists() {
        return Err(format!("{} not found (CPU-only libtorch)", cuda_lib.display()));
    }
    let c = std::ffi::CString::new(cuda_lib.to_string_lossy().as_bytes()).map_err(|e| e.to_string())?;
    // SAFETY: dlopen with a valid C string; the handle is kept for the life of the process.
    let handle = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
    if handle.is_null() {
        // SAFETY: dlerror returns a thread-local C string or null.
        let err = unsafe { libc::dlerror() };
        let msg = if err.is_null() {
            "unknown error".into()
        } else {
            unsafe { std::ffi::CStr::from_ptr(err) }.to_string_lossy().into_owned()
        };
        return Err(format!("dlopen {}: {msg}", cuda_lib.display()));
    }
    Ok(())
}

/// Resolve the device; `auto` picks CUDA 0 when it works, else the CPU.
pub fn resolve(choice: DeviceChoice) -> Result<Device, DeviceError> {
    let cuda_reason = match choice {
        DeviceChoice::Cpu => return Ok(Device::Cpu),
        _ => load_cuda().err(),
    };
    let available = tch::Cuda::is_available();
    match choice {
        DeviceChoice::Cuda(n) if available && (n as i64) < tch::Cuda::device_count() => Ok(Device::Cuda(n)),
        DeviceChoice::Cuda(n) => Err(DeviceError::NoCuda(cuda_reason.unwrap_or_else(|| format!("no CUDA device {n}")))),
        _ if available => Ok(Device::Cuda(0)),
        _ => {
            if let Some(r) = cuda_reason {
                tracing::debug!(reason = %r, "CUDA not used");
            }
            Ok(Device::Cpu)
        }
    }
}

/// Default precision: bf16 on CUDA and on CPUs with AMX tiles; fp32 on CPUs without a bf16
/// dot-product instruction (libtorch emulates bf16 there: 10.7 s against 0.09 s for fp32 on an
/// AVX2-only CPU); on the others bf16 only where libtorch's bf16 GEMM measures clearly faster
/// than fp32 here and now. CPUs differ: one with AVX512-BF16 but no AMX ran bf16 at 105 GFLOP/s
/// against 194 for fp32, another at 365 against 167.
pub fn default_precision(device: Device) -> Precision {
    match device {
        Device::Cuda(_) => Precision::Bf16,
        _ if cpu_has_amx() => Precision::Bf16,
        // x86 AVX512-BF16; aarch64 lists BF16 support as `bf16` under Features
        _ if cpu_has_flag(&["avx512_bf16", "bf16"]) && cpu_bf16_faster() => Precision::Bf16,
        _ => Precision::F32,
    }
}

/// Time the model's typical GEMM (a 2048-token chunk through a 768 → 1152 projection) in fp32
/// and bf16 on this CPU: bf16 when it is at least 1.25× as fast (once per model load; the timed
/// GEMMs took 0.12–0.19 s on a 2-core AVX512-BF16 CPU).
fn cpu_bf16_faster() -> bool {
    use tch::{Kind, Tensor};
    let _guard = tch::no_grad_guard();
    let seconds = |kind: Kind| -> Option<f64> {
        let a = Tensor::f_randn([2048, 768], (kind, Device::Cpu)).ok()?;
        let b = Tensor::f_randn([768, 1152], (kind, Device::Cpu)).ok()?;
        let _ = a.f_matmul(&b).ok()?; // warm-up
        let t = std::time::Instant::now();
        for _ in 0..3 {
            let _ = a.f_matmul(&b).ok()?;
        }
        Some(t.elapsed().as_secs_f64())
    };
    match (seconds(Kind::Float), seconds(Kind::BFloat16)) {
        (Some(fp32), Some(bf16)) => {
            let faster = bf16 * 1.25 <= fp32;
            tracing::info!(fp32_s = fp32, bf16_s = bf16, bf16 = faster, "CPU GEMM timed for the default precision");
            faster
        }
        _ => false,
    }
}

/// Whether this CPU has AMX tiles for bf16 (`amx_bf16`), on which libtorch's own CPU attention
/// runs `q·kᵀ` on the tiles.
pub fn cpu_has_amx() -> bool {
    cpu_has_flag(&["amx_bf16"])
}

/// Whether the first CPU's flags (`flags` on x86, `Features` on aarch64) include one of `any`.
fn cpu_has_flag(any: &[&str]) -> bool {
    std::fs::read_to_string("/proc/cpuinfo")
        .map(|s| {
            s.lines()
                .filter(|l| l.starts_with("flags") || l.starts_with("Features"))
                .take(1)
                .any(|l| l.split_whitespace().any(|f| any.contains(&f)))
        })
        .unwrap_or(false)
}

/// Parse `auto|fp32|bf16|fp16` against a resolved device.
pub fn precision(spec: &str, device: Device) -> Result<Precision, DeviceError> {
    if spec == "auto" {
        return Ok(default_precision(device));
    }
    let p: Precision = spec.parse().map_err(DeviceError::Invalid)?;
    if p == Precision::F16 && device == Device::Cpu {
        return Err(DeviceError::Invalid("fp16 is not supported on CPU; use bf16 or fp32".into()));
    }
    Ok(p)
}

/// Set glibc's allocator up for CPU inference: freed memory stays in the process for the next
/// batch instead of going back to the kernel at every free. Call it first thing in `main`,
/// before any other thread starts; returns whether it was applied.
///
/// A forward pass allocates and frees tensors of tens of MB per layer. By default glibc serves
/// those with fresh `mmap`s and unmaps them on free, and a thread's own arena hands a heap
/// back to the kernel as soon as it is empty, so every layer page-faults and zero-fills its
/// activations again: on a 2-core Xeon with AMX, ~380 k page faults per pass of 4 × 2048
/// tokens (`perf stat -e page-faults` on forward_bench; ~41 k with this setting), ~15 % of
/// the perf samples of a forward_bench run (`clear_page_erms`, `exc_page_fault`, locks).
/// Here allocations never use `mmap` (`M_MMAP_MAX = 0`), the heap top is not trimmed
/// (`M_TRIM_THRESHOLD`), and all threads share the main arena (`M_ARENA_MAX = 1`, which only
/// holds for threads that have not allocated yet — hence first thing in `main`); the model's
/// thread then reuses the same memory pass after pass. The process holds the peak of its
/// largest batch, which the batch budget bounds ([`crate::calibrate::calibrate_budget`] trims before it
/// measures). `DOCPIPE_CPU_KEEP_HEAP=0` leaves glibc's defaults (to compare).
pub fn keep_freed_memory() -> bool {
    if std::env::var("DOCPIPE_CPU_KEEP_HEAP").is_ok_and(|v| v == "0") {
        return false;
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallopt only changes glibc's allocation parameters.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 1) == 1
                && libc::mallopt(libc::M_MMAP_MAX, 0) == 1
                && libc::mallopt(libc::M_TRIM_THRESHOLD, i32::MAX) == 1
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

/// Intra-op threads for CPU inference.
pub fn set_threads(n: i32) {
    tch::set_num_threads(n);
}

/// Memory in use on the device now (`total − free` from `cudaMemGetInfo`, so it counts the
/// whole GPU, libtorch's cache included); `None` on the CPU or when the CUDA runtime is not
/// loaded. The CPU's peak is the process's resident memory (see `docpipe_ops::metrics`).
pub fn memory_in_use(device: Device) -> Option<u64> {
    if !device.is_cuda() {
        return None;
    }
    let (free, total) = cuda_mem_info()?;
    Some(total - free.min(total))
}

/// `(free, total)` bytes of the current CUDA device, from `cudaMemGetInfo`.
fn cuda_mem_info() -> Option<(u64, u64)> {
    type MemGetInfo = unsafe extern "C" fn(*mut usize, *mut usize) -> i32;
    static SYMBOL: std::sync::OnceLock<Option<MemGetInfo>> = std::sync::OnceLock::new();
    let f = SYMBOL
        .get_or_init(|| {
            // SAFETY: looks a symbol up in the libraries already loaded (libcudart, through
            // libtorch_cuda); the name is a valid C string.
            let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"cudaMemGetInfo".as_ptr()) };
            // SAFETY: cudaMemGetInfo(size_t *free, size_t *total) -> cudaError_t
            (!p.is_null()).then(|| unsafe { std::mem::transmute::<*mut libc::c_void, MemGetInfo>(p) })
        })
        .as_ref()?;
    let (mut free, mut total) = (0usize, 0usize);
    // SAFETY: two valid out-pointers; the call acts on the calling thread's current device
    // (the model thread's, which ran the forward passes).
    let rc = unsafe { f(&mut free, &mut total) };
    (rc == 0).then_some((free as u64, total as u64))
}

/// Bytes this process could still allocate on the device: CUDA free memory, or on the CPU
/// `MemAvailable` bounded by the cgroup (v2) memory limit. `None` when unknown.
pub fn memory_available(device: Device) -> Option<u64> {
    if device.is_cuda() {
        let (free, _) = cuda_mem_info()?;
        return Some(free);
    }
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let available = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())?
        * 1024;
    let read = |f: &str| std::fs::read_to_string(format!("/sys/fs/cgroup/{f}")).ok()?.trim().parse::<u64>().ok();
    match (read("memory.max"), read("memory.current")) {
        (Some(max), Some(current)) => Some(available.min(max.saturating_sub(current))),
        _ => Some(available),
    }
}

/// Forget the peak so far, so that [`peak_since_reset`] measures what follows: CUDA needs
/// nothing (libtorch's caching allocator keeps what a pass needed), the CPU trims the heap and
/// resets the process's peak resident memory (`/proc/self/clear_refs`).
pub fn reset_peak(device: Device) {
    if !device.is_cuda() {
        // SAFETY: returns freed heap memory to the system, so that memory a pass reuses from
        // the allocator's free lists shows up in the resident peak again.
        unsafe { libc::malloc_trim(0) };
        let _ = std::fs::write("/proc/self/clear_refs", "5");
    }
}

/// Memory in use at its peak since [`reset_peak`]: device memory held (CUDA), or the
/// process's peak resident memory (CPU).
pub fn peak_since_reset(device: Device) -> Option<u64> {
    if device.is_cuda() {
        return memory_in_use(device);
    }
    process_memory().map(|(_, peak)| peak)
}

/// Memory in use now: device memory held (CUDA) or resident memory (CPU).
pub fn in_use(device: Device) -> Option<u64> {
    if device.is_cuda() {
        return memory_in_use(device);
    }
    process_memory().map(|(resident, _)| resident)
}
