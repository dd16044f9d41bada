//! Bake libtorch's library directory into the binary's run path, so `docpipe` runs without
//! LD_LIBRARY_PATH, and compile our C++ against libtorch's headers: the CPU's fused RMSNorm
//! and GeGLU (`csrc/cpu_norm.cpp`, `csrc/cpu_geglu.cpp`), the decoder's bias/RoPE and paged
//! decode attention (`csrc/cpu_decode.cpp`), the k-quant matrix products
//! (`csrc/cpu_kquant.cpp`) and the packed FlashAttention shim
//! (`csrc/flash_varlen.cpp`, where the op's header exists). `LIBTORCH` is the same variable
//! torch-sys builds against; without it these are left out, and the model uses libtorch's ops
//! instead (`cpu_norm`, `cpu_geglu`, `flash`).
use std::path::Path;

fn main() {
    println!("cargo:rerun-if-env-changed=LIBTORCH");
    println!("cargo:rerun-if-changed=csrc/flash_varlen.cpp");
    println!("cargo:rerun-if-changed=csrc/cpu_norm.cpp");
    println!("cargo:rerun-if-changed=csrc/cpu_decode.cpp");
    println!("cargo:rerun-if-changed=csrc/cpu_geglu.cpp");
    println!("cargo:rerun-if-changed=csrc/cpu_kquant.cpp");
    println!("cargo:rerun-if-changed=csrc/cpu_common.h");
    println!("cargo::rustc-check-cfg=cfg(flash_shim)");
    println!("cargo::rustc-check-cfg=cfg(cpu_kernels)");
    let Ok(dir) = std::env::var("LIBTORCH") else { return };
    println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}/lib");
    let include = Path::new(&dir).join("include");
    let flash = include.join("ATen/ops/_flash_attention_forward.h").exists();
    if !flash {
        println!("cargo:warning=no _flash_attention_forward in {}: packed attention left out", include.display());
    }
    let mut build = cc::Build::new();
    build
        .cpp(true)
        .pic(true)
        .warnings(false)
        .include(&include)
        .include(include.join("torch/csrc/api/include"))
        .flag("-std=c++17")
        .flag("-O3")
        // OpenMP, for at::parallel_for: without it ATen's header runs the loop on one thread
        .flag("-fopenmp")
        // the kernels use no floating-point exceptions: lets the compiler vectorise loops with
        // comparisons in them (GeGLU's clamps, bf16's NaN test); results do not change
        .flag("-fno-trapping-math")
        .flag("-D_GLIBCXX_USE_CXX11_ABI=1")
        .flag("-DGLOG_USE_GLOG_EXPORT")
        .file("csrc/cpu_norm.cpp")
        .file("csrc/cpu_decode.cpp")
        .file("csrc/cpu_geglu.cpp")
        .file("csrc/cpu_kquant.cpp");
    if flash {
        build.file("csrc/flash_varlen.cpp");
    }
    build.compile("docpipe_kernels");
    println!("cargo:rustc-link-search=native={dir}/lib");
    println!("cargo:rustc-link-lib=dylib=torch_cpu");
    println!("cargo:rustc-link-lib=dylib=c10");
    // the OpenMP runtime libtorch uses (its libgomp.so.1, found at run time through the rpath)
    println!("cargo:rustc-link-lib=dylib=gomp");
    println!("cargo:rustc-cfg=cpu_kernels");
    if flash {
        println!("cargo:rustc-cfg=flash_shim");
    }
}
