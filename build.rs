//! Compiles the wire messages with protox (a pure-Rust protobuf compiler), so building beacon
//! needs no system `protoc`: every file in `proto/` (the core's `beacon.proto` and one per
//! replicated machine; a new machine's file is found, not listed). Every message derives
//! serde's traits, so nebcli and the admin HTTP API print any of them as JSON; `pb.rs`, the
//! module tree by package (`beacon.v1.registry` is `pb::registry`), is written beside them,
//! and `descriptors.bin`, the encoded descriptors the gRPC edge serves for reflection.

use std::collections::BTreeSet;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    let mut files: Vec<String> = std::fs::read_dir("proto")?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".proto"))
        .collect();
    files.sort();
    let descriptors = protox::compile(&files, ["proto"])?;
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(
        out.join("descriptors.bin"),
        prost::Message::encode_to_vec(&descriptors),
    )?;
    let packages: BTreeSet<String> = descriptors
        .file
        .iter()
        .filter_map(|f| f.package.clone())
        .collect();
    let mut config = prost_build::Config::new();
    config.type_attribute(".", "#[derive(serde::Serialize, serde::Deserialize)]");
    config.compile_fds(descriptors)?;
    // The root package is `beacon.v1`; each machine's is `beacon.v1.NAME`.
    let mut tree = String::from("// Written by build.rs: the generated messages by package.\n");
    for package in &packages {
        let file = format!("{package}.rs");
        match package.strip_prefix("beacon.v1.") {
            None => tree.push_str(&format!(
                "include!(concat!(env!(\"OUT_DIR\"), \"/{file}\"));\n"
            )),
            Some(module) => tree.push_str(&format!(
                "/// Messages of package `{package}`.\npub mod {module} {{\n    include!(concat!(env!(\"OUT_DIR\"), \"/{file}\"));\n}}\n"
            )),
        }
    }
    std::fs::write(out.join("pb.rs"), tree)?;
    Ok(())
}
