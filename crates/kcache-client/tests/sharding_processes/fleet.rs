//! The replica fleet: spawning, watching and stopping the sharded controller processes and reading what each saw.

use super::*;

#[derive(Debug, Clone, Default)]
pub(super) struct Final {
    pub(super) shards: BTreeSet<u32>,
    pub(super) count: usize,
    pub(super) digest: String,
    pub(super) applied: u64,
    pub(super) ignored: u64,
    /// Reported in the test's output (bytes transferred by this replica's lists).
    #[allow(dead_code, reason = "printed with Debug")]
    pub(super) list_bytes: u64,
}

/// What the replicas printed.
#[derive(Debug, Default)]
pub(super) struct Seen {
    /// (identity, ms, shards) per SHARDS line.
    pub(super) shards: Vec<(String, u128, BTreeSet<u32>)>,
    /// key → (identity, start, end) per RECONCILE line.
    pub(super) reconciles: HashMap<String, Vec<(String, u128, u128)>>,
    /// identity → last OBJECTS count.
    pub(super) objects: HashMap<String, usize>,
    pub(super) finals: HashMap<String, Final>,
    pub(super) synced: BTreeSet<String>,
}

pub(super) fn parse_shards(s: &str) -> BTreeSet<u32> {
    if s == "-" {
        return BTreeSet::new();
    }
    s.split(',').filter_map(|n| n.parse().ok()).collect()
}

impl Seen {
    pub(super) fn take(&mut self, line: &str) {
        let p: Vec<&str> = line.split(' ').collect();
        match p[..] {
            ["SYNCED", id, _] => {
                self.synced.insert(id.to_owned());
            }
            ["SHARDS", id, ms, list] => {
                self.shards
                    .push((id.to_owned(), ms.parse().unwrap_or(0), parse_shards(list)));
            }
            ["RECONCILE", id, start, end, key] => {
                self.reconciles.entry(key.to_owned()).or_default().push((
                    id.to_owned(),
                    start.parse().unwrap_or(0),
                    end.parse().unwrap_or(0),
                ));
            }
            ["OBJECTS", id, _, n] => {
                self.objects.insert(id.to_owned(), n.parse().unwrap_or(0));
            }
            ["FINAL", id, _, list, count, digest, applied, ignored, bytes] => {
                self.finals.insert(
                    id.to_owned(),
                    Final {
                        shards: parse_shards(list),
                        count: count.parse().unwrap_or(usize::MAX),
                        digest: digest.to_owned(),
                        applied: applied.parse().unwrap_or(0),
                        ignored: ignored.parse().unwrap_or(0),
                        list_bytes: bytes.parse().unwrap_or(0),
                    },
                );
            }
            _ => eprintln!("unexpected stdout line: {line:?}"),
        }
    }

    /// The last SHARDS line of `id`.
    pub(super) fn current(&self, id: &str) -> BTreeSet<u32> {
        self.shards
            .iter()
            .rfind(|(i, _, _)| i == id)
            .map(|(_, _, s)| s.clone())
            .unwrap_or_default()
    }
}

pub(super) struct Fleet {
    pub(super) bin: PathBuf,
    pub(super) kubeconfig: PathBuf,
    pub(super) ns: String,
    pub(super) list_watch: bool,
    pub(super) dir: PathBuf,
    pub(super) children: BTreeMap<String, Child>,
    pub(super) seen: Arc<Mutex<Seen>>,
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for c in self.children.values_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Fleet {
    pub(super) fn spawn(&mut self, id: &str) -> Result<()> {
        let stderr = std::fs::File::create(self.dir.join(format!("{id}.stderr")))?;
        let mut cmd = Command::new(&self.bin);
        cmd.args(["--kubeconfig".as_ref(), self.kubeconfig.as_os_str()])
            .args(["--namespace", &self.ns, "--lease-name", "shard-it"])
            .args(["--identity", id, "--shards", &SHARDS.to_string()])
            .args(["--lease-duration", &LEASE_S.to_string()])
            .args(["--renew-deadline", &RENEW_S.to_string()])
            .args(["--retry-period", &RETRY_S.to_string()])
            .env("RUST_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(stderr);
        if self.list_watch {
            cmd.arg("--list-watch");
        }
        let mut child = cmd.spawn().context("spawning sharded_controller")?;
        let stdout = child.stdout.take().context("no stdout")?;
        let seen = Arc::clone(&self.seen);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                seen.lock().unwrap().take(&line);
            }
        });
        self.children.insert(id.to_owned(), child);
        Ok(())
    }

    pub(super) fn live(&self) -> Vec<String> {
        self.children.keys().cloned().collect()
    }

    pub(super) fn sizes(&self) -> Vec<usize> {
        let seen = self.seen.lock().unwrap();
        self.live()
            .iter()
            .map(|id| seen.current(id).len())
            .collect()
    }

    /// Shard → holder, if the live replicas' last SHARDS lines cover every shard once.
    pub(super) fn owners(&self) -> Option<HashMap<u32, String>> {
        let seen = self.seen.lock().unwrap();
        let mut owners = HashMap::new();
        for id in self.live() {
            for s in seen.current(&id) {
                if owners.insert(s, id.clone()).is_some() {
                    return None;
                }
            }
        }
        (owners.len() == SHARDS as usize).then_some(owners)
    }

    pub(super) fn signal(&mut self, id: &str, sig: &str) -> Result<()> {
        let pid = self.children.get(id).context("no such replica")?.id();
        let st = Command::new("kill")
            .args([sig, &pid.to_string()])
            .status()?;
        ensure!(st.success(), "kill {sig} {id} failed");
        Ok(())
    }

    pub(super) fn dump_stderr(&self) {
        for id in self.seen.lock().unwrap().synced.iter() {
            let text =
                std::fs::read_to_string(self.dir.join(format!("{id}.stderr"))).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(12).collect();
            eprintln!("--- {id} stderr (last lines) ---");
            for l in tail.iter().rev() {
                eprintln!("{l}");
            }
        }
    }
}
