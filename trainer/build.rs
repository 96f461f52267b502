//! Build-time code generation: the scalar-summary part of TensorBoard's event-file messages
//! from `proto/tensorboard.proto`, with rust-protobuf's pure-Rust parser (no `protoc`), as the
//! framework crate does for ONNX's. `src/tensorboard/` only fills them in.

fn main() {
    println!("cargo:rerun-if-changed=proto/tensorboard.proto");
    protobuf_codegen::Codegen::new()
        .pure()
        .include("proto")
        .input("proto/tensorboard.proto")
        .cargo_out_dir("tensorboard")
        .run_from_script();
}
