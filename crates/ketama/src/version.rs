//! Which ring of a route table answered a key.

/// Which ring answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Version {
    /// The one ring, where no migration is under way.
    Only,
    /// The ring being replaced.
    Old,
    /// The ring being rolled out.
    New,
}

impl Version {
    /// `only`, `old` or `new`.
    pub fn name(self) -> &'static str {
        match self {
            Version::Only => "only",
            Version::Old => "old",
            Version::New => "new",
        }
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
