//! Calling our C++ (`csrc/`, compiled by `build.rs`): each entry point returns 0, or non-zero
//! after writing a NUL-terminated message into the caller's buffer; tensors come back as heap
//! `at::Tensor*` handles, the same kind tch's own C API returns.

use std::ffi::{c_char, c_int, c_void};

use tch::Tensor;

/// Run one call with an error buffer; its message (first line) on failure.
pub(crate) fn call(f: impl FnOnce(*mut c_char, usize) -> c_int) -> Result<(), String> {
    let mut err = [0 as c_char; 512];
    if f(err.as_mut_ptr(), err.len()) == 0 {
        return Ok(());
    }
    // SAFETY: the shim wrote a NUL-terminated message into `err` (zeroed beforehand, and the
    // shim writes at most `len − 1` bytes and a NUL).
    let msg = unsafe { std::ffi::CStr::from_ptr(err.as_ptr()) }.to_string_lossy();
    Err(msg.lines().next().unwrap_or("unknown error").to_string())
}

/// Take over a tensor handle a successful call stored; a null handle is an error.
///
/// # Safety
/// `ptr` is null or a heap `at::Tensor*` that nothing else owns (tch frees it on drop).
pub(crate) unsafe fn take(ptr: *mut c_void) -> Result<Tensor, String> {
    if ptr.is_null() {
        return Err("the shim returned no tensor".into());
    }
    // SAFETY: per the contract above.
    Ok(unsafe { Tensor::from_ptr(ptr.cast()) })
}
