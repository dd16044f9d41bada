//! The S3 side of ingest: a client for any S3-compatible endpoint (path-style), listing with
//! pagination, and size-limited downloads.

use aws_sdk_s3::Client;

#[derive(Debug, Clone, Default)]
pub struct S3Config {
    /// Custom endpoint (MinIO, SeaweedFS, ...); `None` for AWS itself.
    pub endpoint: Option<String>,
    pub region: String,
}

#[derive(Debug, thiserror::Error)]
pub enum S3Error {
    #[error("listing s3://{bucket}/{prefix} failed: {message}")]
    List { bucket: String, prefix: String, message: String, retryable: bool },
    #[error("downloading s3://{bucket}/{key} failed: {message}")]
    Get { bucket: String, key: String, message: String, retryable: bool },
    #[error("uploading s3://{bucket}/{key} failed: {message}")]
    Put { bucket: String, key: String, message: String, retryable: bool },
    #[error("s3://{bucket}/{key} is {bytes} bytes, over the limit of {limit} (max_pdf_bytes)")]
    TooLarge { bucket: String, key: String, bytes: u64, limit: u64 },
}

impl S3Error {
    /// Network errors, timeouts, 5xx and throttling: worth another attempt. Missing objects,
    /// denied access and over-limit sizes are not.
    pub fn is_retryable(&self) -> bool {
        match self {
            S3Error::List { retryable, .. } | S3Error::Get { retryable, .. } | S3Error::Put { retryable, .. } => {
                *retryable
            }
            S3Error::TooLarge { .. } => false,
        }
    }
}

/// Whether an SDK error is transient (see [`S3Error::is_retryable`]).
fn transient<E: aws_sdk_s3::error::ProvideErrorMetadata>(
    e: &aws_sdk_s3::error::SdkError<E, aws_sdk_s3::config::http::HttpResponse>,
) -> bool {
    use aws_sdk_s3::error::SdkError;
    match e {
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => true,
        SdkError::ServiceError(se) => {
            let code = se.err().code().unwrap_or_default();
            let status = se.raw().status().as_u16();
            status >= 500
                || status == 429
                || matches!(
                    code,
                    "SlowDown" | "Throttling" | "ThrottlingException" | "RequestTimeout" | "InternalError"
                )
        }
        _ => false,
    }
}

/// Bounded retries for S3 calls: 5 attempts, 0.3 s to 10 s apart.
pub fn backoff() -> docpipe_ops::retry::ExponentialBuilder {
    docpipe_ops::retry::bounded(std::time::Duration::from_millis(300), std::time::Duration::from_secs(10), 4)
}

/// An object found by listing.
#[derive(Debug, Clone)]
pub struct ObjectInfo {
    pub key: String,
    pub size: u64,
    pub etag: Option<String>,
}

/// Build a client from the standard AWS environment (keys, profile, ...) plus our endpoint.
pub async fn client(cfg: &S3Config) -> Client {
    let shared = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new(cfg.region.clone()))
        .load()
        .await;
    let mut b = aws_sdk_s3::config::Builder::from(&shared).force_path_style(true);
    if let Some(ep) = &cfg.endpoint {
        b = b.endpoint_url(ep);
    }
    Client::from_conf(b.build())
}

/// Every object under `prefix`, following continuation tokens.
pub async fn list(client: &Client, bucket: &str, prefix: &str) -> Result<Vec<ObjectInfo>, S3Error> {
    let mut out = Vec::new();
    let mut pages = client.list_objects_v2().bucket(bucket).prefix(prefix).into_paginator().send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| S3Error::List {
            bucket: bucket.into(),
            prefix: prefix.into(),
            retryable: transient(&e),
            message: aws_sdk_s3::error::DisplayErrorContext(&e).to_string(),
        })?;
        for obj in page.contents() {
            let Some(key) = obj.key() else { continue };
            if key.ends_with('/') {
                continue;
            }
            out.push(ObjectInfo {
                key: key.to_string(),
                size: obj.size().unwrap_or(0).max(0) as u64,
                etag: obj.e_tag().map(|e| e.trim_matches('"').to_string()),
            });
        }
    }
    Ok(out)
}

/// Download an object, refusing anything over `limit` bytes.
pub async fn get(client: &Client, bucket: &str, key: &str, limit: u64) -> Result<Vec<u8>, S3Error> {
    let err = |message: String, retryable| S3Error::Get { bucket: bucket.into(), key: key.into(), message, retryable };
    let resp = client
        .get_object()
        .bucket(bucket)
        .key(key)
        .send()
        .await
        .map_err(|e| err(aws_sdk_s3::error::DisplayErrorContext(&e).to_string(), transient(&e)))?;
    let len = resp.content_length().unwrap_or(0).max(0) as u64;
    if len > limit {
        return Err(S3Error::TooLarge { bucket: bucket.into(), key: key.into(), bytes: len, limit });
    }
    let body = resp.body.collect().await.map_err(|e| err(e.to_string(), true))?;
    let bytes = body.into_bytes().to_vec();
    if bytes.len() as u64 > limit {
        return Err(S3Error::TooLarge { bucket: bucket.into(), key: key.into(), bytes: bytes.len() as u64, limit });
    }
    Ok(bytes)
}

/// Create `bucket` unless it exists (for `docpipe put`, the demo and tests).
pub async fn ensure_bucket(client: &Client, bucket: &str) -> Result<(), S3Error> {
    if client.head_bucket().bucket(bucket).send().await.is_ok() {
        return Ok(());
    }
    client.create_bucket().bucket(bucket).send().await.map_err(|e| S3Error::Put {
        bucket: bucket.into(),
        key: String::new(),
        message: aws_sdk_s3::error::DisplayErrorContext(&e).to_string(),
        retryable: transient(&e),
    })?;
    Ok(())
}

/// Upload `body` as `s3://bucket/key`.
pub async fn put(client: &Client, bucket: &str, key: &str, body: Vec<u8>) -> Result<(), S3Error> {
    client
        .put_object()
        .bucket(bucket)
        .key(key)
        .content_type("application/pdf")
        .body(body.into())
        .send()
        .await
        .map_err(|e| S3Error::Put {
            bucket: bucket.into(),
            key: key.into(),
            message: aws_sdk_s3::error::DisplayErrorContext(&e).to_string(),
            retryable: transient(&e),
        })?;
    Ok(())
}
