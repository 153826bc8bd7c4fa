//! An in-process manager on loopback: what `venn-lab run` experiments and `venn-lab load`
//! measure against, started one way.

use std::path::Path;
use std::sync::Arc;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use venn_core::PolicyRegistry;
use venn_manager::{Clock, Manager, Settings};

/// A manager serving on `127.0.0.1` until stopped.
pub struct LocalManager {
    /// Its base URL (`http://127.0.0.1:PORT`).
    pub url: String,
    /// The manager itself (status, metrics).
    pub manager: Arc<Manager>,
    stop: Option<oneshot::Sender<()>>,
    server: JoinHandle<std::io::Result<()>>,
}

impl LocalManager {
    /// Opens a manager on a fresh database at `db` (any old file and its WAL removed) and
    /// serves it on an ephemeral loopback port.
    pub async fn start(settings: Settings, db: &Path) -> anyhow::Result<LocalManager> {
        Self::start_with_registry(settings, &PolicyRegistry::builtin(), db).await
    }

    /// [`LocalManager::start`], building the settings' policy with `registry` (which may
    /// hold custom policies).
    pub async fn start_with_registry(
        settings: Settings,
        registry: &PolicyRegistry,
        db: &Path,
    ) -> anyhow::Result<LocalManager> {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
        }
        let manager = Arc::new(Manager::open_with_registry(
            settings,
            registry,
            db,
            Clock::System,
        )?);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let (tx, rx) = oneshot::channel::<()>();
        let server = tokio::spawn(venn_manager::server::serve(
            listener,
            manager.clone(),
            async {
                let _ = rx.await;
            },
        ));
        Ok(LocalManager {
            url,
            manager,
            stop: Some(tx),
            server,
        })
    }

    /// Stops serving (gracefully) and waits for the server to end.
    pub async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        let _ = (&mut self.server).await;
    }
}
