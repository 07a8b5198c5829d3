//! Bearer tokens (api.md "Auth"). The prefix tells the kind: `bat_` operator
//! API token (workspace-scoped or admin), `brt_` registration token, `bst_`
//! session token, `blt_` lease token. Only a SHA-256 of a token is ever
//! stored: tokens are 192 random bits, so a fast hash is as good as a slow
//! one against guessing, and it lets a lookup be one `GetItem` by hash.

use rand::Rng;
use sha2::{Digest, Sha256};

use crate::error::ApiError;

/// The kinds of token, by prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKind {
    Operator,
    Registration,
    Session,
    Lease,
}

impl TokenKind {
    pub fn prefix(self) -> &'static str {
        match self {
            TokenKind::Operator => "bat_",
            TokenKind::Registration => "brt_",
            TokenKind::Session => "bst_",
            TokenKind::Lease => "blt_",
        }
    }
}

/// A new secret token of `kind`: the prefix and 48 hex characters.
pub fn new_token(kind: TokenKind) -> String {
    let bytes: [u8; 24] = rand::rng().random();
    format!("{}{}", kind.prefix(), hex(&bytes))
}

/// What is stored in place of a token.
pub fn hash_token(token: &str) -> String {
    hex(&Sha256::digest(token.as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The request's bearer token if it is of `kind`; 401 otherwise (a token of
/// another kind is as good as none here).
pub fn require_token(req: &lambda_http::Request, kind: TokenKind) -> Result<&str, ApiError> {
    match crate::http::bearer_token(req) {
        Some(token) if token.starts_with(kind.prefix()) && token.len() > kind.prefix().len() => Ok(token),
        _ => Err(ApiError::unauthenticated()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_carry_their_kind_and_hash_stably() {
        let token = new_token(TokenKind::Session);
        assert!(token.starts_with("bst_") && token.len() == 4 + 48);
        assert_eq!(hash_token(&token), hash_token(&token));
        assert_ne!(hash_token(&token), hash_token(&new_token(TokenKind::Session)));
        assert_eq!(hash_token("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }
}
