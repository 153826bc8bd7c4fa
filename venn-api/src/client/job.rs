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

    /// `GET /weights`.
    pub async fn weights(&self) -> Result<Vec<u8>, ClientError> {
        let resp = send(PEER, self.get(WEIGHTS_PATH)).await?;
        let bytes = resp
            .bytes()
            .await
            .map_err(|source| ClientError::Http { peer: PEER, source })?;
        Ok(bytes.to_vec())
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
