//! Any bytes as a certificate or key file a config names (`[tls]`,
//! `[upstream_tls]`, `[control]`), read as the router reads them
//! (`ketama_config::pem`): nothing panics; every refusal names the config
//! key and the file; every certificate accepted has its facts read.
#![no_main]

use ketama_config::pem::{info, Named};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let named = Named { config: "router.toml", key: "tls.certificates[0].cert_file", path: "cert.pem" };
    match named.certificates_in(data) {
        Ok(certs) => {
            assert!(!certs.is_empty());
            for c in &certs {
                info(c).expect("an accepted certificate's facts");
            }
        }
        Err(e) => {
            assert_eq!(e.key, "tls.certificates[0].cert_file");
            assert!(e.message.starts_with("cert.pem: "), "{}", e.message);
        }
    }
    if let Err(e) = named.private_key_in(data) {
        assert!(e.message.starts_with("cert.pem: "), "{}", e.message);
    }
});
