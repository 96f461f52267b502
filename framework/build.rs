//! Build-time code generation:
//! - ONNX's model format from `proto/onnx.proto`, with rust-protobuf's pure-Rust parser (no
//!   `protoc`), as burn's own ONNX reader does. The messages are encoded by the `protobuf`
//!   crate; `src/onnx/` only fills them in.
//! - With the `onednn` feature, oneDNN's C API from the installed `dnnl.h` (Debian's
//!   `libdnnl-dev`) through bindgen, as a table of functions opened at run time
//!   (`src/kernels/onednn/library.rs`).

fn main() {
    println!("cargo:rerun-if-changed=proto/onnx.proto");
    protobuf_codegen::Codegen::new()
        .pure()
        .include("proto")
        .input("proto/onnx.proto")
        .cargo_out_dir("onnx")
        .run_from_script();
    #[cfg(feature = "onednn")]
    onednn::bindings();
}

#[cfg(feature = "onednn")]
mod onednn {
    /// The functions ember calls; each must be in the library that is opened.
    const FUNCTIONS: &[&str] = &[
        "dnnl_version",
        "dnnl_get_effective_cpu_isa",
        "dnnl_engine_create",
        "dnnl_stream_create",
        "dnnl_stream_wait",
        "dnnl_memory_desc_init_by_strides",
        "dnnl_memory_desc_init_by_tag",
        "dnnl_memory_desc_equal",
        "dnnl_reorder_primitive_desc_create",
        "dnnl_memory_desc_get_size",
        "dnnl_memory_create",
        "dnnl_memory_destroy",
        "dnnl_primitive_attr_create",
        "dnnl_primitive_attr_destroy",
        "dnnl_primitive_attr_set_post_ops",
        "dnnl_primitive_attr_set_scratchpad_mode",
        "dnnl_post_ops_create",
        "dnnl_post_ops_destroy",
        "dnnl_post_ops_append_eltwise",
        "dnnl_primitive_desc_create",
        "dnnl_primitive_desc_destroy",
        "dnnl_primitive_desc_query_md",
        "dnnl_primitive_create",
        "dnnl_primitive_destroy",
        "dnnl_primitive_execute",
        "dnnl_dilated_convolution_forward_desc_init",
        "dnnl_dilated_convolution_backward_data_desc_init",
        "dnnl_dilated_convolution_backward_weights_desc_init",
        "dnnl_eltwise_forward_desc_init",
        "dnnl_eltwise_backward_desc_init",
        "dnnl_pooling_v2_forward_desc_init",
        "dnnl_pooling_v2_backward_desc_init",
        "dnnl_matmul_desc_init",
        "dnnl_batch_normalization_forward_desc_init",
        "dnnl_batch_normalization_backward_desc_init",
        "dnnl_layer_normalization_forward_desc_init",
        "dnnl_layer_normalization_backward_desc_init",
        "dnnl_softmax_forward_desc_init",
        "dnnl_softmax_backward_desc_init",
        "dnnl_vanilla_rnn_forward_desc_init",
        "dnnl_vanilla_rnn_backward_desc_init",
        "dnnl_lstm_forward_desc_init",
        "dnnl_lstm_backward_desc_init",
        "dnnl_lbr_gru_forward_desc_init",
        "dnnl_lbr_gru_backward_desc_init",
    ];

    pub fn bindings() {
        let header = ["/usr/include/dnnl.h", "/usr/include/oneapi/dnnl/dnnl.h"]
            .into_iter()
            .find(|path| std::path::Path::new(path).exists())
            .unwrap_or_else(|| {
                panic!(
                    "ember's `onednn` feature needs oneDNN's C headers (dnnl.h): install them with \
                     `apt-get install -y libdnnl-dev libclang-dev` (the README's first command does), \
                     or build without the feature (`--no-default-features`) for burn-flex alone"
                )
            });
        println!("cargo:rerun-if-changed={header}");
        let mut builder = bindgen::Builder::default()
            .header(header)
            .dynamic_library_name("Dnnl")
            .dynamic_link_require_all(true)
            .prepend_enum_name(false)
            .layout_tests(false)
            // oneDNN's comments hold C and pseudo-code, which rustdoc would compile as tests.
            .generate_comments(false)
            .allowlist_type("dnnl_.*")
            .allowlist_var("DNNL_.*");
        for function in FUNCTIONS {
            builder = builder.allowlist_function(function);
        }
        let out = std::path::PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("dnnl.rs");
        let code = builder
            .generate()
            .unwrap_or_else(|e| {
                panic!("bindgen could not read {header} (is libclang-dev installed?): {e}")
            })
            .to_string()
            // Edition 2024 marks foreign blocks unsafe; this bindgen predates it.
            .replace("extern \"C\" {", "unsafe extern \"C\" {");
        std::fs::write(&out, code)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", out.display()));
    }
}
