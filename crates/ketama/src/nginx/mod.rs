//! nginx's routing keys: `hash <template> consistent` with the template's
//! variables giving nginx 1.22's bytes ([`Template`]), and the variables
//! themselves ([`uri`], [`args`], [`arg`], [`cookie`], [`host`]) for tools
//! that read one.
//!
//! | variable | value (nginx 1.22) |
//! |---|---|
//! | `$request_uri` | the target as sent (absolute-form: from its path on) |
//! | `$uri` | the path `%`-decoded, `.`/`..` resolved, slashes merged, no query |
//! | `$args` | the query as sent, up to a `#` |
//! | `$arg_NAME` | the first `NAME=` argument's value as sent (name in any case) |
//! | `$cookie_NAME` | the first cookie `NAME` over every `Cookie` line, up to `;`, quotes kept |
//! | `$http_NAME` | the first field named so (`_` for `-`); `$http_cookie` every `Cookie` line joined by `; `, `$http_x_forwarded_for` by `, ` |
//! | `$host` | the host of the target or `Host`, lowercased, port and a trailing dot cut; empty without one |
//! | `$remote_addr` | the client's address, without port |
//! | `$scheme` | `http` or `https` |
//!
//! A variable not found is the empty string; a key that comes out empty
//! is nginx's cue to fall back to round robin, which the router follows.

mod template;
mod vars;

pub use template::{Template, TemplateError, Var};
pub use vars::{
    append_uri, arg, args, cookie, host, http_var_matches, uri, write_addr, write_host,
    write_joined, InvalidUri,
};
