//! Bake libtorch's library directory into the binary's run path, so `docpipe` runs without
//! LD_LIBRARY_PATH, and compile the packed FlashAttention shim (`csrc/flash_varlen.cpp`)
//! against libtorch's headers. `LIBTORCH` is the same variable torch-sys builds against;
//! without it (or without the op's header) the shim is left out and the `flash` module
//! reports the packed path unavailable.
use std::path::Path;

fn main() {
    println!("cargo:rerun-if-env-changed=LIBTORCH");
    println!("cargo:rerun-if-changed=csrc/flash_varlen.cpp");
    println!("cargo::rustc-check-cfg=cfg(flash_shim)");
    let Ok(dir) = std::env::var("LIBTORCH") else { return };
    println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}/lib");
    let include = Path::new(&dir).join("include");
    if !include.join("ATen/ops/_flash_attention_forward.h").exists() {
        println!("cargo:warning=no _flash_attention_forward in {}: packed attention left out", include.display());
        return;
    }
    cc::Build::new()
        .cpp(true)
        .pic(true)
        .warnings(false)
        .include(&include)
        .include(include.join("torch/csrc/api/include"))
        .flag("-std=c++17")
        .flag("-D_GLIBCXX_USE_CXX11_ABI=1")
        .flag("-DGLOG_USE_GLOG_EXPORT")
        .file("csrc/flash_varlen.cpp")
        .compile("docpipe_flash");
    println!("cargo:rustc-link-search=native={dir}/lib");
    println!("cargo:rustc-link-lib=dylib=torch_cpu");
    println!("cargo:rustc-link-lib=dylib=c10");
    println!("cargo:rustc-cfg=flash_shim");
}
