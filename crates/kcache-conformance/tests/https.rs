//! The kubeconfig an HTTPS embedded server writes works for kube-rs's client as is: it
//! verifies the server against the generated CA (for 127.0.0.1) and sends the admin token.

use kcache_conformance::Target;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_client_talks_to_the_https_server_with_its_kubeconfig() -> anyhow::Result<()> {
    let server = kcache_apiserver::ApiServer::builder()
        .https(true)
        .build()
        .start()
        .await?;
    let dir = std::env::temp_dir().join(format!("kcache-https-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("kubeconfig");
    server.write_kubeconfig(&path)?;
    let t = Target::from_kubeconfig(&path).await?;
    let r = t.send("GET", "/api/v1/namespaces/default", None).await?;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["metadata"]["name"], "default");
    // The same server without the token: 401.
    let unauthenticated = path.with_file_name("anonymous");
    let text = std::fs::read_to_string(&path)?;
    let token_line = text
        .lines()
        .find(|l| l.trim_start().starts_with("token: "))
        .expect("a token in the kubeconfig")
        .to_owned();
    std::fs::write(
        &unauthenticated,
        text.replace(&token_line, "    token: not-the-token"),
    )?;
    let r = Target::from_kubeconfig(&unauthenticated)
        .await?
        .send("GET", "/api/v1/namespaces/default", None)
        .await?;
    assert_eq!(r.status, 401);
    server.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
