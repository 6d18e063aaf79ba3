//! Options shared by several commands.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use ketama::{Compat, Layout, Ring, RingBuilder, DEFAULT_POINT_MULTIPLE};

/// How to build a ring: scheme, layout and point multiple.
#[derive(Args, Debug, Clone)]
pub struct RingArgs {
    /// Hashing scheme: nginx, pingora-v1 or pingora-v2.
    #[arg(long, default_value = "nginx")]
    pub compat: Compat,
    /// Storage layout: wide, packed or compact (routing is the same in every layout).
    #[arg(long, default_value = "wide")]
    pub layout: Layout,
    /// Points per weight unit.
    #[arg(long, default_value_t = DEFAULT_POINT_MULTIPLE)]
    pub point_multiple: u32,
}

impl RingArgs {
    /// The builder these options describe.
    pub fn builder(&self) -> RingBuilder {
        RingBuilder::new()
            .compat(self.compat)
            .layout(self.layout)
            .point_multiple(self.point_multiple)
    }
}

/// Reads and parses a servers file.
pub fn read_nodes(path: &Path) -> anyhow::Result<Vec<ketama::Node>> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read servers file {name}"))?;
    Ok(ketama::parse_servers(&text, &name)?)
}

/// Builds a ring from nodes read from `path` (named in the error).
pub fn build_ring(
    path: &Path,
    nodes: Vec<ketama::Node>,
    builder: RingBuilder,
) -> anyhow::Result<Ring> {
    builder.build(nodes).with_context(|| {
        format!(
            "cannot build a {} ring from {}",
            builder.get_compat(),
            path.display()
        )
    })
}

/// Reads a servers file and builds a ring from it.
pub fn load_ring(path: &Path, builder: RingBuilder) -> anyhow::Result<Ring> {
    build_ring(path, read_nodes(path)?, builder)
}

/// A servers file path argument.
pub type ServersPath = PathBuf;
