//! The one text format of a stored timestamp: RFC 3339, UTC, always nine
//! fractional digits (`2026-12-02T10:00:00.000000000Z`), so nothing is lost
//! of what the clock gave and a timestamp reads back equal. Fixed width makes
//! string order time order, which conditions such as "seen before" and sort
//! keys such as "queued at" rely on; one format for every timestamp of an
//! item, whether serde wrote it or an update expression did.
//!
//! Reading accepts any RFC 3339 text, so items written before this format
//! was fixed still load.

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Deserializer, Serializer};

/// A timestamp as stored.
pub fn format(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Nanos, true)
}

/// `#[serde(with = "crate::time::stored")]` on a `DateTime<Utc>` field of a stored item.
pub mod stored {
    use super::*;

    pub fn serialize<S: Serializer>(at: &DateTime<Utc>, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&format(*at))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<DateTime<Utc>, D::Error> {
        DateTime::<Utc>::deserialize(deserializer)
    }
}

/// `#[serde(default, with = "crate::time::stored_option")]` on an
/// `Option<DateTime<Utc>>` field of a stored item.
pub mod stored_option {
    use super::*;

    pub fn serialize<S: Serializer>(at: &Option<DateTime<Utc>>, serializer: S) -> Result<S::Ok, S::Error> {
        match at {
            Some(at) => serializer.serialize_some(&format(*at)),
            None => serializer.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<DateTime<Utc>>, D::Error> {
        Option::<DateTime<Utc>>::deserialize(deserializer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
    struct Item {
        #[serde(with = "stored")]
        at: DateTime<Utc>,
        #[serde(default, with = "stored_option")]
        maybe: Option<DateTime<Utc>>,
    }

    #[test]
    fn stored_timestamps_have_one_fixed_width_format_and_old_ones_still_load() {
        let at = DateTime::parse_from_rfc3339("2026-12-02T10:00:00Z").expect("valid").with_timezone(&Utc);
        let json = serde_json::to_value(Item { at, maybe: Some(at) }).expect("serialises");
        assert_eq!(json["at"], "2026-12-02T10:00:00.000000000Z");
        assert_eq!(json["maybe"], json["at"]);
        assert!(format(at) < format(at + chrono::Duration::milliseconds(1)));
        let old: Item = serde_json::from_str(r#"{"at": "2026-12-02T10:00:00.5Z"}"#).expect("old format loads");
        assert_eq!(old.maybe, None);
        assert_eq!(old.at.timestamp_subsec_millis(), 500);
        let precise = at + chrono::Duration::nanoseconds(123_456_789);
        let json = serde_json::to_string(&Item { at: precise, maybe: None }).expect("serialises");
        assert_eq!(serde_json::from_str::<Item>(&json).expect("reads back").at, precise, "nothing is lost");
    }
}
