//! Runnable examples of kcache (`cargo run -p kcache-examples --example quickstart`).
//!
//! The README's quick start is `quickstart.rs`, verbatim; a test keeps the two equal.

#[cfg(test)]
mod tests {
    /// The first ```rust block of the README.
    fn readme_rust_block() -> String {
        let readme = include_str!("../README.md");
        let start = readme.find("```rust\n").expect("README has a rust block") + "```rust\n".len();
        let len = readme[start..].find("```").expect("the block ends");
        readme[start..start + len].to_owned()
    }

    #[test]
    fn readme_quick_start_is_the_quickstart_example_verbatim() {
        assert_eq!(readme_rust_block(), include_str!("quickstart.rs"));
    }
}
