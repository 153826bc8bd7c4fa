//! A device's client of the job it was assigned ([`crate::job`]'s protocol): fetch the
//! plan and the global weights, upload the trained weights, every request carrying the
//! task token.

use super::{ClientError, call, send};
use crate::job::{
    PLAN_PATH, SAMPLES_HEADER, TASK_TOKEN_HEADER, TaskPlan, UPDATE_PATH, WEIGHTS_CONTENT_TYPE,
    WEIGHTS_PATH,
};
use std::time::Duration;

const PEER: &str = "job";

/// One device's view of one job, for one task.
#[derive(Clone, Copy, Debug)]
pub struct JobClient<'a> {
    http: &'a reqwest::Client,
    base: &'a str,
    token: &'a str,
    timeout: Duration,
}

impl<'a> JobClient<'a> {
    /// A client of the job at `plan_url` holding task `token`; every request gives up
    /// after `timeout`.
    pub fn new(
        http: &'a reqwest::Client,
        plan_url: &'a str,
        token: &'a str,
        timeout: Duration,
    ) -> Self {
        JobClient {
            http,
            base: plan_url.trim_end_matches('/'),
            token,
            timeout,
        }
    }

    fn get(&self, path: &str) -> reqwest::RequestBuilder {
        self.http
            .get(format!("{}{path}", self.base))
            .header(TASK_TOKEN_HEADER, self.token)
            .timeout(self.timeout)
    }

    /// `GET /plan`.
    pub async fn plan(&self) -> Result<TaskPlan, ClientError> {
        call(PEER, self.get(PLAN_PATH)).await
    }

    /// `GET /weights`, read no further than `limit` bytes: a job (or whoever answers at
    /// its `plan_url`) must not make a device buffer an unbounded body.
    pub async fn weights(&self, limit: u64) -> Result<Vec<u8>, ClientError> {
        let mut resp = send(PEER, self.get(WEIGHTS_PATH)).await?;
        let too_large = ClientError::TooLarge { peer: PEER, limit };
        if resp.content_length().is_some_and(|n| n > limit) {
            return Err(too_large);
        }
        let mut out = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(|e| ClientError::http(PEER, e))? {
            if (out.len() + chunk.len()) as u64 > limit {
                return Err(too_large);
            }
            out.extend_from_slice(&chunk);
        }
        Ok(out)
    }

    /// `POST /update`: the trained weights and the samples they were trained on.
    pub async fn upload(&self, weights: Vec<u8>, samples: u64) -> Result<(), ClientError> {
        let req = self
            .http
            .post(format!("{}{UPDATE_PATH}", self.base))
            .header(TASK_TOKEN_HEADER, self.token)
            .header(SAMPLES_HEADER, samples.to_string())
            .header("content-type", WEIGHTS_CONTENT_TYPE)
            .timeout(self.timeout)
            .body(weights);
        send(PEER, req).await?;
        Ok(())
    }
}
