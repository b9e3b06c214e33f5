//! Lease and session tokens: `<replica id>:<32 lowercase hex digits>`, unguessable,
//! made in one place. Reached through [`crate::ext`] by Leasehold's sibling crates.

use rand::{Rng, RngExt};

/// The replica id inside a lease token (`<replica-id>:<hex>`).
pub fn replica_of_token(token: &str) -> &str {
    token.rsplit_once(':').map_or(token, |(replica, _)| replica)
}

/// A fresh, unguessable lease token for `replica`.
pub fn new_token(replica: &str) -> String {
    token_with(replica, &mut rand::rng())
}

/// A token for `replica` drawn from `rng` (a seeded one replays a simulation).
pub fn token_with(replica: &str, rng: &mut impl Rng) -> String {
    format!("{replica}:{:032x}", rng.random::<u128>())
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    #[test]
    fn token_names_its_replica() {
        let t = new_token("node:a");
        assert_eq!(replica_of_token(&t), "node:a");
        assert_eq!(t.len(), "node:a:".len() + 32);
        assert_ne!(new_token("x"), new_token("x"));
    }

    #[test]
    fn a_seeded_rng_gives_the_same_tokens() {
        let mut a = rand::rngs::StdRng::seed_from_u64(7);
        let mut b = rand::rngs::StdRng::seed_from_u64(7);
        assert_eq!(token_with("r", &mut a), token_with("r", &mut b));
    }
}
