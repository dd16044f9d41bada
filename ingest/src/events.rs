//! S3 bucket notifications — the standard S3 event JSON that AWS S3, MinIO and SeaweedFS emit —
//! so `docpipe ingest --listen` processes uploads without listing the bucket.
//!
//! ```json
//! {"Records": [{"eventName": "s3:ObjectCreated:Put",
//!               "s3": {"bucket": {"name": "contracts"},
//!                      "object": {"key": "2026/acme+msa.pdf", "size": 48213, "eTag": "…"}}}]}
//! ```
//! Keys arrive URL-encoded (`+` for a space). Only `ObjectCreated` events are acted on.

use serde::Deserialize;

use crate::s3::ObjectInfo;

#[derive(Debug, Deserialize)]
pub struct Event {
    #[serde(rename = "Records", default)]
    pub records: Vec<Record>,
}

#[derive(Debug, Deserialize)]
pub struct Record {
    #[serde(rename = "eventName", default)]
    pub event_name: String,
    pub s3: S3Entity,
}

#[derive(Debug, Deserialize)]
pub struct S3Entity {
    pub bucket: Bucket,
    pub object: Object,
}

#[derive(Debug, Deserialize)]
pub struct Bucket {
    pub name: String,
}

#[derive(Debug, Deserialize)]
pub struct Object {
    pub key: String,
    #[serde(default)]
    pub size: u64,
    #[serde(rename = "eTag", default)]
    pub etag: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum EventError {
    #[error("not an S3 event notification: {0}")]
    Json(#[from] serde_json::Error),
    #[error("object key {0:?} is not valid URL encoding of UTF-8")]
    Key(String),
}

/// The objects created, as `(bucket, object)`, from one notification message.
pub fn created_objects(body: &[u8]) -> Result<Vec<(String, ObjectInfo)>, EventError> {
    let event: Event = serde_json::from_slice(body)?;
    let mut out = Vec::new();
    for r in event.records {
        // AWS: "ObjectCreated:Put"; MinIO: "s3:ObjectCreated:Put"
        if !r.event_name.trim_start_matches("s3:").starts_with("ObjectCreated:") {
            continue;
        }
        let key = url_decode(&r.s3.object.key).ok_or_else(|| EventError::Key(r.s3.object.key.clone()))?;
        let etag = r.s3.object.etag.map(|e| e.trim_matches('"').to_string()).filter(|e| !e.is_empty());
        out.push((r.s3.bucket.name, ObjectInfo { key, size: r.s3.object.size, etag }));
    }
    Ok(out)
}

/// `application/x-www-form-urlencoded` decoding, as S3 event keys use it.
fn url_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minio_and_aws_events() {
        // as MinIO's AMQP target publishes it (abridged)
        let minio = br#"{"EventName":"s3:ObjectCreated:Put","Key":"contracts/2026/Acme MSA.pdf","Records":[
            {"eventVersion":"2.0","eventSource":"minio:s3","awsRegion":"","eventTime":"2026-11-30T01:00:00.000Z",
             "eventName":"s3:ObjectCreated:Put","userIdentity":{"principalId":"minio"},
             "s3":{"s3SchemaVersion":"1.0","configurationId":"Config","bucket":{"name":"contracts","arn":"arn:aws:s3:::contracts"},
                   "object":{"key":"2026%2FAcme+MSA%C3%A9.pdf","size":48213,"eTag":"d41d8cd98f00b204e9800998ecf8427e",
                             "contentType":"application/pdf","sequencer":"17A"}}}]}"#;
        let got = created_objects(minio).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0, "contracts");
        assert_eq!(got[0].1.key, "2026/Acme MSAé.pdf");
        assert_eq!((got[0].1.size, got[0].1.etag.as_deref()), (48213, Some("d41d8cd98f00b204e9800998ecf8427e")));
        let aws = br#"{"Records":[{"eventName":"ObjectRemoved:Delete","s3":{"bucket":{"name":"b"},"object":{"key":"x.pdf"}}},
                                  {"eventName":"ObjectCreated:CompleteMultipartUpload","s3":{"bucket":{"name":"b"},"object":{"key":"y.pdf","size":7}}}]}"#;
        let got = created_objects(aws).unwrap();
        assert_eq!(got.iter().map(|g| g.1.key.as_str()).collect::<Vec<_>>(), vec!["y.pdf"]);
        assert!(created_objects(b"not json").is_err());
        assert!(created_objects(
            br#"{"Records":[{"eventName":"ObjectCreated:Put","s3":{"bucket":{"name":"b"},"object":{"key":"%ZZ"}}}]}"#
        )
        .is_err());
        // a test event (s3:TestEvent) has no records
        assert!(created_objects(br#"{"Service":"Amazon S3","Event":"s3:TestEvent"}"#).unwrap().is_empty());
    }
}
