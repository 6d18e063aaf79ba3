//! The settings a ring is built with, as one value: scheme, layout and
//! point multiple.

use std::fmt;

use crate::{Layout, Scheme};

/// The default number of points per weight unit, as in nginx and pingora.
pub const DEFAULT_POINT_MULTIPLE: u32 = 160;

/// How a ring is built: which peer it routes like ([`Scheme`]), how it
/// stores its points ([`Layout`]; never changes routing) and how many
/// points each weight unit gets.
///
/// `Default` is nginx's scheme, the `Wide` layout and 160 points per
/// weight unit. Each part parses from its name (`"pingora-v2".parse()`,
/// `"compact".parse()`); `Display` prints all three, e.g.
/// `nginx, compact, 160 points per weight unit`.
///
/// ```
/// use ketama::{Scheme, Layout, RingSettings};
/// let s = RingSettings {
///     compat: "pingora-v2".parse()?,
///     layout: Layout::Compact,
///     ..RingSettings::default()
/// };
/// assert_eq!(s.to_string(), "pingora-v2, compact, 160 points per weight unit");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RingSettings {
    /// The hashing scheme.
    pub compat: Scheme,
    /// The storage layout.
    pub layout: Layout,
    /// Points per weight unit.
    pub point_multiple: u32,
}

impl Default for RingSettings {
    fn default() -> Self {
        RingSettings {
            compat: Scheme::default(),
            layout: Layout::default(),
            point_multiple: DEFAULT_POINT_MULTIPLE,
        }
    }
}

impl RingSettings {
    /// The settings a ring is built with: under a scheme that fixes its
    /// points per weight unit ([`Scheme::fixed_point_multiple`]: HAProxy's
    /// 16), the default multiple stands for the scheme's own (a
    /// configuration that never chose one gets it); any other value is
    /// kept, and a build refuses it.
    pub fn normalized(self) -> RingSettings {
        match self.compat.fixed_point_multiple() {
            Some(m) if self.point_multiple == DEFAULT_POINT_MULTIPLE => RingSettings {
                point_multiple: m,
                ..self
            },
            _ => self,
        }
    }
}

impl fmt::Display for RingSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}, {}, {} points per weight unit",
            self.compat, self.layout, self.point_multiple
        )
    }
}
