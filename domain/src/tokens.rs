//! Bearer tokens (api.md "Auth"), every kind minted and parsed here and
//! nowhere else. Pure: reading a token from an HTTP request is `http`'s job.
//!
//! The prefix tells the kind:
//!
//! | kind | form | stored as |
//! | --- | --- | --- |
//! | operator | `bat_<secret>` | `APITOKEN#<hash>` (looked up by hash) |
//! | registration | `brt_<id>.<secret>` | the token item `<id>`, with the hash |
//! | session | `bst_<id>.<secret>` | the session item `<id>`, with the hash |
//! | lease | `blt_<execution>.<epoch>.<secret>` | the lease item, with the hash |
//! | provisioner | `bpt_<id>.<secret>` | the provisioner item `<id>`, with the hash |
//!
//! A token that names its item in the clear makes authenticating one
//! `GetItem` by id followed by a comparison of hashes (the lease token also
//! names its epoch, so heartbeat and complete need no read at all). Only a
//! SHA-256 of a token is ever stored: secrets are 192 random bits, so a fast
//! hash is as good as a slow one against guessing, and it lets a lookup be
//! one `GetItem` by hash.

use rand::Rng;
use sha2::{Digest, Sha256};
use uuid::Uuid;

/// The kinds of token, by prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKind {
    Operator,
    Registration,
    Session,
    Lease,
    Provisioner,
}

impl TokenKind {
    pub fn prefix(self) -> &'static str {
        match self {
            TokenKind::Operator => "bat_",
            TokenKind::Registration => "brt_",
            TokenKind::Session => "bst_",
            TokenKind::Lease => "blt_",
            TokenKind::Provisioner => "bpt_",
        }
    }

    /// Whether `token` is of this kind by its prefix (and has something after it).
    pub fn is_kind_of(self, token: &str) -> bool {
        token.starts_with(self.prefix()) && token.len() > self.prefix().len()
    }
}

/// Secrets are this many random bytes (192 bits), written as hex.
const SECRET_BYTES: usize = 24;
/// A parsed secret shorter than this many characters is refused.
const MIN_SECRET_CHARS: usize = 32;

fn secret() -> String {
    let bytes: [u8; SECRET_BYTES] = rand::rng().random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// What is stored in place of a token: its SHA-256, in hex.
pub fn hash_token(token: &str) -> String {
    format!("{:x}", Sha256::digest(token.as_bytes()))
}

/// A new operator API token (`bat_`).
pub fn new_operator_token() -> String {
    format!("{}{}", TokenKind::Operator.prefix(), secret())
}

/// A new registration token naming its item `id`.
pub fn new_registration_token(id: Uuid) -> String {
    named(TokenKind::Registration, id)
}

/// A new session token naming its session `id`.
pub fn new_session_token(id: Uuid) -> String {
    named(TokenKind::Session, id)
}

/// A new lease token naming the execution and the epoch it fences.
pub fn new_lease_token(execution_id: Uuid, epoch: u64) -> String {
    format!("{}{}.{epoch}.{}", TokenKind::Lease.prefix(), execution_id.simple(), secret())
}

/// A new provisioner token naming its provisioner `id`.
pub fn new_provisioner_token(id: Uuid) -> String {
    named(TokenKind::Provisioner, id)
}

/// The provisioner a provisioner token names, if it is well formed.
pub fn provisioner_token_id(token: &str) -> Option<Uuid> {
    named_id(token, TokenKind::Provisioner)
}

fn named(kind: TokenKind, id: Uuid) -> String {
    format!("{}{}.{}", kind.prefix(), id.simple(), secret())
}

/// The item a registration token names, if it is well formed.
pub fn registration_token_id(token: &str) -> Option<Uuid> {
    named_id(token, TokenKind::Registration)
}

/// The session a session token names, if it is well formed.
pub fn session_token_id(token: &str) -> Option<Uuid> {
    named_id(token, TokenKind::Session)
}

fn named_id(token: &str, kind: TokenKind) -> Option<Uuid> {
    let rest = token.strip_prefix(kind.prefix())?;
    let (id, secret) = rest.split_once('.')?;
    (secret.len() >= MIN_SECRET_CHARS).then_some(())?;
    Uuid::parse_str(id).ok()
}

/// The id of one claim (`request_id`) bound to the secret of the session
/// that makes it: every lease token this claim hands out derives from both.
/// A claim is tried again with the same id when its answer was lost (an
/// HTTP API gives up on its integration at 30 s while the function goes
/// on), so two tries of one claim can run side by side. Derived tokens make
/// them hand out the same token for the same lease, whichever commits
/// first: no try can invalidate the token another one handed out, and
/// nothing secret is stored (only the token's hash, as for every token).
/// Only the session's holder knows its secret, so only it can derive them.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct ClaimKey {
    pub request_id: Uuid,
    secret: [u8; 32],
}

impl std::fmt::Debug for ClaimKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClaimKey").field("request_id", &self.request_id).finish_non_exhaustive()
    }
}

impl ClaimKey {
    pub fn new(session_token: &str, request_id: Uuid) -> Self {
        let mut hasher = Sha256::new();
        hasher.update(b"baton claim\0");
        hasher.update(session_token.as_bytes());
        hasher.update(b"\0");
        hasher.update(request_id.as_bytes());
        Self { request_id, secret: hasher.finalize().into() }
    }

    /// The lease token of this claim for `execution_id` at `epoch`.
    pub fn lease_token(&self, execution_id: Uuid, epoch: u64) -> String {
        let mut hasher = Sha256::new();
        hasher.update(self.secret);
        hasher.update(execution_id.as_bytes());
        hasher.update(epoch.to_be_bytes());
        let digest = hasher.finalize();
        let secret: String = digest[..SECRET_BYTES].iter().map(|b| format!("{b:02x}")).collect();
        format!("{}{}.{epoch}.{secret}", TokenKind::Lease.prefix(), execution_id.simple())
    }
}

/// The id of one registration (`request_id`) bound to the registration
/// token that makes it: the session's id and token derive from both, so
/// every try of one registration (a retry after a lost answer, or two tries
/// side by side past the HTTP API's 30 s) makes or finds the same session
/// and hands out the same token. Only the registration token's holder can
/// derive them; nothing secret is stored.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct RegistrationKey {
    secret: [u8; 32],
}

impl std::fmt::Debug for RegistrationKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistrationKey").finish_non_exhaustive()
    }
}

impl RegistrationKey {
    pub fn new(registration_token: &str, request_id: Uuid) -> Self {
        let mut hasher = Sha256::new();
        hasher.update(b"baton registration\0");
        hasher.update(registration_token.as_bytes());
        hasher.update(b"\0");
        hasher.update(request_id.as_bytes());
        Self { secret: hasher.finalize().into() }
    }

    /// The session this registration makes (a random-format UUID: its
    /// bytes are the key's, which no one else can predict).
    pub fn session_id(&self) -> Uuid {
        let mut bytes = [0u8; 16];
        bytes.copy_from_slice(&self.secret[..16]);
        uuid::Builder::from_random_bytes(bytes).into_uuid()
    }

    /// The session token this registration hands out.
    pub fn session_token(&self) -> String {
        let mut hasher = Sha256::new();
        hasher.update(self.secret);
        hasher.update(b"session token");
        let digest = hasher.finalize();
        let secret: String = digest[..SECRET_BYTES].iter().map(|b| format!("{b:02x}")).collect();
        format!("{}{}.{secret}", TokenKind::Session.prefix(), self.session_id().simple())
    }
}

/// The id of one reserve (`request_id`) bound to the provisioner token that
/// makes it: the i-th reservation's id and its ephemeral registration token
/// derive from both, so every try of one reserve makes or finds the same
/// reservations and hands out the same tokens. Only the provisioner token's
/// holder can derive them; only their hashes are stored.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct ReservationKey {
    secret: [u8; 32],
}

impl std::fmt::Debug for ReservationKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReservationKey").finish_non_exhaustive()
    }
}

impl ReservationKey {
    pub fn new(provisioner_token: &str, request_id: Uuid) -> Self {
        let mut hasher = Sha256::new();
        hasher.update(b"baton reservation\0");
        hasher.update(provisioner_token.as_bytes());
        hasher.update(b"\0");
        hasher.update(request_id.as_bytes());
        Self { secret: hasher.finalize().into() }
    }

    fn derive(&self, what: &[u8], index: u32) -> [u8; 32] {
        let mut hasher = Sha256::new();
        hasher.update(self.secret);
        hasher.update(what);
        hasher.update(index.to_be_bytes());
        hasher.finalize().into()
    }

    fn id(&self, what: &[u8], index: u32) -> Uuid {
        let mut bytes = [0u8; 16];
        bytes.copy_from_slice(&self.derive(what, index)[..16]);
        uuid::Builder::from_random_bytes(bytes).into_uuid()
    }

    /// The `index`-th reservation of this reserve.
    pub fn reservation_id(&self, index: u32) -> Uuid {
        self.id(b"reservation", index)
    }

    /// The `index`-th reservation's registration token: its id and the token.
    pub fn registration_token(&self, index: u32) -> (Uuid, String) {
        let id = self.id(b"token id", index);
        let digest = self.derive(b"token secret", index);
        let secret: String = digest[..SECRET_BYTES].iter().map(|b| format!("{b:02x}")).collect();
        (id, format!("{}{}.{secret}", TokenKind::Registration.prefix(), id.simple()))
    }
}

/// The execution and epoch a lease token names, if it is well formed.
pub fn parse_lease_token(token: &str) -> Option<(Uuid, u64)> {
    let rest = token.strip_prefix(TokenKind::Lease.prefix())?;
    let mut parts = rest.splitn(3, '.');
    let execution = Uuid::parse_str(parts.next()?).ok()?;
    let epoch = parts.next()?.parse().ok()?;
    let secret = parts.next()?;
    (secret.len() >= MIN_SECRET_CHARS).then_some((execution, epoch))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_try_of_one_claim_derives_the_same_lease_token_and_nothing_else_does() {
        let (session, request, execution) = (new_session_token(Uuid::now_v7()), Uuid::now_v7(), Uuid::now_v7());
        let key = ClaimKey::new(&session, request);
        let token = key.lease_token(execution, 3);
        assert_eq!(token, ClaimKey::new(&session, request).lease_token(execution, 3), "a retry's token");
        assert_eq!(parse_lease_token(&token), Some((execution, 3)), "a well-formed lease token");
        assert_ne!(token, key.lease_token(execution, 4), "another epoch");
        assert_ne!(token, key.lease_token(Uuid::now_v7(), 3), "another execution");
        assert_ne!(token, ClaimKey::new(&session, Uuid::now_v7()).lease_token(execution, 3), "another claim");
        let other_session = new_session_token(Uuid::now_v7());
        assert_ne!(token, ClaimKey::new(&other_session, request).lease_token(execution, 3), "another session");
        assert!(!format!("{key:?}").contains(&session), "the session's secret is never printed");
    }

    #[test]
    fn every_try_of_one_registration_derives_the_same_session_and_nothing_else_does() {
        let (registration, request) = (new_registration_token(Uuid::now_v7()), Uuid::now_v7());
        let key = RegistrationKey::new(&registration, request);
        let again = RegistrationKey::new(&registration, request);
        assert_eq!((key.session_id(), key.session_token()), (again.session_id(), again.session_token()));
        assert_eq!(session_token_id(&key.session_token()), Some(key.session_id()), "a well-formed session token");
        let other_request = RegistrationKey::new(&registration, Uuid::now_v7());
        assert_ne!(key.session_id(), other_request.session_id(), "another registration");
        assert_ne!(key.session_token(), other_request.session_token());
        let other_token = RegistrationKey::new(&new_registration_token(Uuid::now_v7()), request);
        assert_ne!(key.session_token(), other_token.session_token(), "another registration token");
        assert!(!format!("{key:?}").contains(&registration), "the token is never printed");
    }

    #[test]
    fn every_try_of_one_reserve_derives_the_same_reservations_and_nothing_else_does() {
        let (provisioner, request) = (new_provisioner_token(Uuid::now_v7()), Uuid::now_v7());
        let key = ReservationKey::new(&provisioner, request);
        let again = ReservationKey::new(&provisioner, request);
        assert_eq!(key.reservation_id(0), again.reservation_id(0));
        assert_eq!(key.registration_token(1), again.registration_token(1));
        assert_ne!(key.reservation_id(0), key.reservation_id(1), "each index its own");
        let (id, token) = key.registration_token(0);
        assert_eq!(registration_token_id(&token), Some(id), "a well-formed registration token");
        assert_ne!(key.reservation_id(0), ReservationKey::new(&provisioner, Uuid::now_v7()).reservation_id(0));
        let other = new_provisioner_token(Uuid::now_v7());
        assert_ne!(token, ReservationKey::new(&other, request).registration_token(0).1, "another provisioner");
        assert!(!format!("{key:?}").contains(&provisioner));
    }

    #[test]
    fn tokens_carry_their_kind_and_hash_stably() {
        let token = new_operator_token();
        assert!(token.starts_with("bat_") && token.len() == 4 + 48);
        assert!(TokenKind::Operator.is_kind_of(&token) && !TokenKind::Session.is_kind_of(&token));
        assert!(!TokenKind::Operator.is_kind_of("bat_"));
        assert_eq!(hash_token(&token), hash_token(&token));
        assert_ne!(hash_token(&token), hash_token(&new_operator_token()));
        assert_eq!(hash_token("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }

    #[test]
    fn registration_and_session_tokens_name_their_item_and_nothing_else_parses() {
        let id = Uuid::now_v7();
        let registration = new_registration_token(id);
        assert!(registration.starts_with("brt_"));
        assert_eq!(registration_token_id(&registration), Some(id));
        assert_eq!(session_token_id(&registration), None, "a registration token is no session token");
        let session = new_session_token(id);
        assert!(session.starts_with("bst_"));
        assert_eq!(session_token_id(&session), Some(id));
        assert_eq!(session_token_id(&format!("bst_{}.short", id.simple())), None);
        assert_eq!(session_token_id("bst_nope.0123456789abcdef0123456789abcdef"), None);
    }

    #[test]
    fn a_lease_token_names_its_execution_and_epoch_and_nothing_else_parses() {
        let id = Uuid::now_v7();
        let token = new_lease_token(id, 7);
        assert_eq!(parse_lease_token(&token), Some((id, 7)));
        assert_eq!(parse_lease_token("blt_nope"), None);
        assert_eq!(parse_lease_token(&format!("blt_{}.7.short", id.simple())), None);
        assert_eq!(parse_lease_token(&token.replacen("blt_", "bst_", 1)), None);
    }
}
