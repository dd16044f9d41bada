//! Bake libtorch's library directory into the binary's run path, so `docpipe` runs without
//! LD_LIBRARY_PATH. `LIBTORCH` is the same variable torch-sys builds against.
fn main() {
    println!("cargo:rerun-if-env-changed=LIBTORCH");
    if let Ok(dir) = std::env::var("LIBTORCH") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}/lib");
    }
}
