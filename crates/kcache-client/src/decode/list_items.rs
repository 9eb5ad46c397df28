//! What a list's body format (JSON, protobuf) gives the streaming list reader of the client:
//! its items as chunks arrive, then the list.

use bytes::Bytes;
use kcache::lister_watcher::Error as LwError;
use kube_core::ObjectList;

/// One format's splitting and decoding.
pub(crate) trait Items<K: Clone>: Send + 'static {
    /// Takes one chunk, decoding the items it completed into `out`.
    fn push(&mut self, chunk: &Bytes, out: &mut Vec<K>) -> Result<(), LwError>;
    /// Whether a plain body's frames are gathered into chunks of `SPLIT_CHUNK` first (JSON:
    /// see the module docs); protobuf's length-prefixed items split as cheaply from any chunk.
    fn gathers(&self) -> bool {
        false
    }
    /// Once the list's metadata has been read, before its items are all read: its `continue`
    /// token, if it has one (see `kcache::ListerWatcher::list_telling_continue`); `None`
    /// while the metadata has not come. Asked after every chunk until it answers.
    fn early_continue(&mut self) -> Option<Option<String>>;
    /// After the last chunk: the list's envelope decoded, with `items` as its items.
    fn finish(self: Box<Self>, items: Vec<K>) -> Result<ObjectList<K>, LwError>;
}

/// A list body that is not a list.
pub(crate) fn malformed(e: &dyn std::fmt::Display) -> LwError {
    LwError::decode(format!("list body: {e}"))
}
