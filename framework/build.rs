//! Generates the Rust messages of ONNX's model format from `proto/onnx.proto` with
//! rust-protobuf's pure-Rust parser (no `protoc`), as burn's own ONNX reader does. The messages
//! are encoded by the `protobuf` crate; `src/onnx/` only fills them in.

fn main() {
    println!("cargo:rerun-if-changed=proto/onnx.proto");
    protobuf_codegen::Codegen::new()
        .pure()
        .include("proto")
        .input("proto/onnx.proto")
        .cargo_out_dir("onnx")
        .run_from_script();
}
