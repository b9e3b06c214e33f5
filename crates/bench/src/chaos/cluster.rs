//! The processes and links of a chaos run: a coordination redis-server, a resource
//! store, and replica processes that reach each server only through their own
//! [`FaultProxy`], so a fault on a replica's links hits both.

use std::time::Duration;

use leasehold_testkit::{FaultProxy, RedisServer};

use crate::group::harness::EXIT;
use crate::group::process::{EventLog, ReplicaProcess, ReplicaSpec};
use crate::store::{BoxError, StoreSpec};

/// One replica id with its two links, and its current process (if any).
#[derive(Debug)]
struct Slot {
    id: String,
    coordination: FaultProxy,
    resource: FaultProxy,
    process: Option<ReplicaProcess>,
    incarnation: u32,
    paused: bool,
}

/// The servers, the proxies and the replica processes.
#[derive(Debug)]
pub struct Cluster {
    spec: ReplicaSpec,
    coordination: Option<RedisServer>,
    resource: RedisServer,
    slots: Vec<Slot>,
    log: EventLog,
    joined: u32,
}

impl Cluster {
    /// Starts both servers.
    ///
    /// # Errors
    /// If a redis-server cannot start.
    pub fn start(spec: ReplicaSpec, log: EventLog) -> Result<Self, BoxError> {
        Ok(Self {
            spec,
            coordination: Some(RedisServer::try_start()?),
            resource: RedisServer::try_start()?,
            slots: Vec::new(),
            log,
            joined: 0,
        })
    }

    /// The coordination server's URL (direct, not proxied).
    pub fn coordination_url(&self) -> String {
        self.coordination
            .as_ref()
            .map_or_else(String::new, RedisServer::url)
    }

    /// The resource store's URL (direct, not proxied).
    pub fn resource_url(&self) -> String {
        self.resource.url()
    }

    /// The ids of every replica slot (running or not).
    pub fn replicas(&self) -> Vec<String> {
        self.slots.iter().map(|s| s.id.clone()).collect()
    }

    /// Adds replica `id` with fresh proxies and starts its process.
    ///
    /// # Errors
    /// If a proxy or the process cannot start.
    pub async fn add(&mut self, id: &str) -> Result<(), BoxError> {
        let coordination = self.coordination.as_ref().ok_or("no coordination server")?;
        let slot = Slot {
            id: id.to_owned(),
            coordination: FaultProxy::start(coordination.addr()).await?,
            resource: FaultProxy::start(self.resource.addr()).await?,
            process: None,
            incarnation: 0,
            paused: false,
        };
        self.slots.push(slot);
        let i = self.slots.len() - 1;
        self.restart(i)
    }

    /// Adds a new replica (`joiner-1`, `joiner-2`, ...); returns its index.
    ///
    /// # Errors
    /// As [`Cluster::add`].
    pub async fn join(&mut self) -> Result<usize, BoxError> {
        self.joined += 1;
        self.add(&format!("joiner-{}", self.joined)).await?;
        Ok(self.slots.len() - 1)
    }

    /// Stops replica `i` gracefully and removes it with its proxies.
    ///
    /// # Errors
    /// If it does not stop cleanly.
    pub async fn remove(&mut self, i: usize) -> Result<(), BoxError> {
        let result = self.term(i).await;
        self.slots.remove(i);
        result
    }

    /// The id of replica `i`.
    pub fn id(&self, i: usize) -> &str {
        &self.slots[i].id
    }

    /// Starts a new process for replica `i` (no-op if one runs).
    ///
    /// # Errors
    /// If the process cannot start.
    pub fn restart(&mut self, i: usize) -> Result<(), BoxError> {
        let slot = &mut self.slots[i];
        if slot.process.is_some() {
            return Ok(());
        }
        slot.incarnation += 1;
        slot.process = Some(ReplicaProcess::spawn(
            &self.spec,
            &slot.id,
            slot.incarnation,
            &StoreSpec::single(slot.coordination.url()),
            Some(&slot.resource.url()),
            &self.log,
        )?);
        Ok(())
    }

    /// SIGKILLs replica `i` and reaps it.
    ///
    /// # Errors
    /// If it cannot be killed or reaped.
    pub async fn kill(&mut self, i: usize) -> Result<(), BoxError> {
        if let Some(mut p) = self.slots[i].process.take() {
            p.kill()?;
            p.wait(EXIT).await?;
        }
        self.slots[i].paused = false;
        Ok(())
    }

    /// SIGTERMs replica `i` and waits for its graceful exit.
    ///
    /// # Errors
    /// If it does not exit 0 in time.
    pub async fn term(&mut self, i: usize) -> Result<(), BoxError> {
        if self.slots[i].paused {
            self.resume(i).await?;
        }
        match self.slots[i].process.take() {
            Some(mut p) => p.terminate(EXIT).await,
            None => Ok(()),
        }
    }

    /// SIGSTOPs replica `i`.
    ///
    /// # Errors
    /// If the signal fails.
    pub async fn pause(&mut self, i: usize) -> Result<(), BoxError> {
        if let Some(p) = &self.slots[i].process {
            p.signal("STOP").await?;
            self.slots[i].paused = true;
        }
        Ok(())
    }

    /// SIGCONTs replica `i` if it is paused.
    ///
    /// # Errors
    /// If the signal fails.
    pub async fn resume(&mut self, i: usize) -> Result<(), BoxError> {
        if let (true, Some(p)) = (self.slots[i].paused, &self.slots[i].process) {
            p.signal("CONT").await?;
        }
        self.slots[i].paused = false;
        Ok(())
    }

    /// Black-holes both links of replica `i`.
    pub fn blackhole(&self, i: usize) {
        self.slots[i].coordination.blackhole();
        self.slots[i].resource.blackhole();
    }

    /// Delays both links of replica `i` by `delay` each way.
    pub fn latency(&self, i: usize, delay: Duration) {
        self.slots[i].coordination.latency(delay);
        self.slots[i].resource.latency(delay);
    }

    /// Resets every connection of both links of replica `i`.
    pub fn reset(&self, i: usize) {
        self.slots[i].coordination.reset_connections();
        self.slots[i].resource.reset_connections();
    }

    /// Heals both links of replica `i`.
    pub fn pass(&self, i: usize) {
        self.slots[i].coordination.pass();
        self.slots[i].resource.pass();
    }

    /// Restarts the coordination server on the same port, losing all its data.
    ///
    /// # Errors
    /// If it does not come back.
    pub async fn restart_coordination(&mut self) -> Result<(), BoxError> {
        let mut server = self.coordination.take().ok_or("no coordination server")?;
        let server = tokio::task::spawn_blocking(move || {
            server.restart();
            server
        })
        .await
        .map_err(|e| format!("restarting the coordination redis-server: {e}"))?;
        self.coordination = Some(server);
        Ok(())
    }

    /// Heals everything: links pass, paused replicas resume, dead ones restart.
    ///
    /// # Errors
    /// If a signal or a start fails.
    pub async fn heal(&mut self) -> Result<(), BoxError> {
        for i in 0..self.slots.len() {
            self.pass(i);
            self.resume(i).await?;
            self.restart(i)?;
        }
        Ok(())
    }

    /// SIGTERMs every replica at once, then waits for each.
    ///
    /// # Errors
    /// The first replica that did not stop cleanly.
    pub async fn stop_all(&mut self) -> Result<(), BoxError> {
        let mut first_err = None;
        for slot in &self.slots {
            if let Some(p) = &slot.process
                && let Err(e) = p.signal("TERM").await
            {
                first_err.get_or_insert(e);
            }
        }
        for slot in &mut self.slots {
            if let Some(mut p) = slot.process.take() {
                match p.wait(EXIT).await {
                    Ok(status) if status.success() => {}
                    Ok(status) => {
                        first_err.get_or_insert(
                            format!("replica {} exited with {status} after SIGTERM", slot.id)
                                .into(),
                        );
                    }
                    Err(e) => {
                        first_err.get_or_insert(e);
                    }
                }
            }
        }
        first_err.map_or(Ok(()), Err)
    }
}
