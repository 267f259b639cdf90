//! Artifact store, reader, manifest normalization and verification.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};

use corral_capture::{CaptureResult, CaptureStats};
use corral_contract::canonical::{Digest, canonical_json};
use corral_contract::capabilities::SandboxCapabilities;
use corral_contract::codes::{ReasonCode, Rejection};
use corral_contract::manifest::{
    ChangeKind, ChangedPath, DocumentRef, ExecutableRecord, ExecutionRecord, Outcome,
    ResultManifest, SandboxRecord, Termination,
};
use corral_manifest::{
    ArtifactRole, ArtifactStore, LocalArtifactBundleReader, LogCapture, ReadError, RunRecord,
    StoreError, VerifyStatus, normalize_and_store, verify_manifest, verify_manifest_file,
};

fn tmp() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("corral-manifest-test-")
        .tempdir()
        .unwrap()
}

#[test]
fn put_is_atomic_read_only_and_idempotent() {
    let t = tmp();
    let store = ArtifactStore::open(&t.path().join("artifacts"), &[]).unwrap();
    let r = store.put(b"hello\n").unwrap();
    assert_eq!(r.digest, Digest::of_bytes(b"hello\n"));
    assert_eq!(r.bytes, 6);
    let p = store.path_of(&r.digest);
    assert_eq!(
        p,
        t.path()
            .canonicalize()
            .unwrap()
            .join("artifacts/sha256")
            .join(r.digest.hex())
    );
    assert_eq!(fs::read(&p).unwrap(), b"hello\n");
    let md = fs::metadata(&p).unwrap();
    assert_eq!(md.permissions().mode() & 0o777, 0o444);
    let ino = md.ino();
    // Idempotent: same digest, same file (not rewritten).
    let r2 = store.put(b"hello\n").unwrap();
    assert_eq!(r2, r);
    assert_eq!(fs::metadata(&p).unwrap().ino(), ino);
    // No temporary files left behind.
    let names: Vec<_> = fs::read_dir(p.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
    // Empty artifacts are fine.
    let e = store.put(b"").unwrap();
    assert_eq!(store.reader().read(&e.digest).unwrap(), b"");
}

#[test]
fn reader_detects_tampering_missing_and_links() {
    let t = tmp();
    let store = ArtifactStore::open(&t.path().join("a"), &[]).unwrap();
    let reader = LocalArtifactBundleReader::new(store.root());
    let r = store.put(b"patch bytes").unwrap();
    assert_eq!(reader.read(&r.digest).unwrap(), b"patch bytes");

    let p = store.path_of(&r.digest);
    fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).unwrap();
    fs::write(&p, b"patch bytez").unwrap();
    match reader.read(&r.digest) {
        Err(ReadError::Mismatch { expected, actual }) => {
            assert_eq!(expected, r.digest);
            assert_eq!(actual, Digest::of_bytes(b"patch bytez"));
        }
        other => panic!("expected a mismatch, got {other:?}"),
    }
    // Writing the same content again repairs the damaged copy.
    store.put(b"patch bytes").unwrap();
    assert_eq!(reader.read(&r.digest).unwrap(), b"patch bytes");

    fs::remove_file(&p).unwrap();
    assert!(matches!(reader.read(&r.digest), Err(ReadError::Missing(_))));

    let secret = t.path().join("secret");
    fs::write(&secret, b"patch bytes").unwrap();
    std::os::unix::fs::symlink(&secret, &p).unwrap();
    assert!(matches!(
        reader.read(&r.digest),
        Err(ReadError::NotRegular(_))
    ));

    let big = store.put(&[7u8; 1000]).unwrap();
    assert!(matches!(
        reader.read_bounded(&big.digest, 999),
        Err(ReadError::TooLarge { .. })
    ));
    assert_eq!(reader.read_bounded(&big.digest, 1000).unwrap().len(), 1000);
}

#[test]
fn store_refuses_workspace_and_canonical_repo() {
    let t = tmp();
    let ws = t.path().join("ws");
    let repo = t.path().join("repo");
    fs::create_dir_all(&ws).unwrap();
    fs::create_dir_all(&repo).unwrap();
    for bad in [ws.join("artifacts"), ws.clone(), repo.join(".git/corral")] {
        let err = ArtifactStore::open(&bad, &[&ws, &repo]).unwrap_err();
        assert!(matches!(err, StoreError::InsideProtected { .. }), "{err}");
        assert!(
            !bad.join("sha256").exists(),
            "nothing may be created for a refused store"
        );
    }
    // Through a symlink into the workspace: still refused.
    let link = t.path().join("link");
    std::os::unix::fs::symlink(&ws, &link).unwrap();
    assert!(ArtifactStore::open(&link.join("art"), &[&ws]).is_err());
    assert!(ArtifactStore::open(&t.path().join("art/../ws/x"), &[&ws]).is_err());
    assert!(ArtifactStore::open(std::path::Path::new("relative"), &[]).is_err());
    // A sibling is fine.
    ArtifactStore::open(&t.path().join("artifacts"), &[&ws, &repo]).unwrap();
}

fn record<'a>(
    capture: Option<&'a CaptureResult>,
    termination: Termination,
    exit: Option<i32>,
) -> RunRecord<'a> {
    RunRecord {
        work_unit: DocumentRef {
            id: "wu-1".into(),
            digest: Digest::of_bytes(b"wu"),
        },
        preset: DocumentRef {
            id: "demo".into(),
            digest: Digest::of_bytes(b"preset"),
        },
        base_sha: "a".repeat(40),
        sandbox: SandboxRecord {
            backend: "test".into(),
            capabilities: SandboxCapabilities::none("test"),
            policy_digest: Digest::of_bytes(b"policy"),
            mode: None,
        },
        execution: ExecutionRecord {
            termination,
            exit_code: exit,
            signal: None,
            wall_ms: 12,
            cpu_ms: 3,
            peak_memory_bytes: 1 << 20,
            cpu_cap_millicores: Some(1500),
        },
        executable: ExecutableRecord {
            path: "/bin/true".into(),
            digest: Digest::of_bytes(b"exe"),
        },
        stdout: LogCapture {
            kept: b"out\n",
            total_bytes: 4,
            truncated: false,
        },
        stderr: LogCapture {
            kept: b"err",
            total_bytes: 10,
            truncated: true,
        },
        capture,
        extra_rejections: Vec::new(),
        egress: Vec::new(),
        model_calls: Vec::new(),
        model_calls_unrecorded: 0,
    }
}

fn accepted() -> CaptureResult {
    CaptureResult {
        changed_paths: vec![ChangedPath {
            path: "src/a.rs".into(),
            change: ChangeKind::Modified,
        }],
        ignored_paths: vec!["src/x.log".into()],
        rejections: vec![],
        patch: Some(b"diff --git a/src/a.rs b/src/a.rs\n".to_vec()),
        stats: CaptureStats::default(),
    }
}

#[test]
fn outcome_rules_and_authority() {
    let t = tmp();
    let store = ArtifactStore::open(&t.path().join("a"), &[]).unwrap();
    let ok = accepted();
    let mut rejected = accepted();
    rejected.patch = None;
    rejected.rejections.push(Rejection::new(
        ReasonCode::PathOutOfScope,
        Some(".github/x".into()),
        "out",
    ));

    let cases: Vec<(Option<&CaptureResult>, Termination, Option<i32>, Outcome)> = vec![
        (
            Some(&ok),
            Termination::Exited,
            Some(0),
            Outcome::CandidateCaptured,
        ),
        (
            Some(&rejected),
            Termination::Exited,
            Some(0),
            Outcome::CandidateRejected,
        ),
        (
            Some(&ok),
            Termination::Exited,
            Some(1),
            Outcome::AttemptFailed,
        ),
        (
            Some(&ok),
            Termination::Signaled,
            None,
            Outcome::AttemptFailed,
        ),
        (
            Some(&ok),
            Termination::WallTimeout,
            None,
            Outcome::AttemptFailed,
        ),
        (None, Termination::Exited, Some(0), Outcome::AttemptFailed),
        (None, Termination::NotStarted, None, Outcome::AttemptFailed),
    ];
    // No change: an empty patch is no candidate. Control: the same capture with a change
    // is captured (the first row above).
    let mut empty = accepted();
    empty.changed_paths.clear();
    empty.patch = Some(Vec::new());
    for (term, exit, want) in [
        (Termination::Exited, Some(0), Outcome::CandidateRejected),
        (Termination::Exited, Some(1), Outcome::AttemptFailed),
    ] {
        let stored = normalize_and_store(&record(Some(&empty), term, exit), &store).unwrap();
        assert_eq!(stored.manifest.outcome, want);
        assert!(stored.manifest.candidate.is_none(), "{want:?}");
        let codes: Vec<ReasonCode> = stored.manifest.rejections.iter().map(|r| r.code).collect();
        if want == Outcome::CandidateRejected {
            assert_eq!(codes, vec![ReasonCode::EmptyCandidate]);
            let json: serde_json::Value = serde_json::from_slice(&stored.bytes).unwrap();
            assert_eq!(json["candidate"], serde_json::Value::Null);
            assert_eq!(json["rejections"][0]["code"], "empty_candidate");
        } else {
            // A failed attempt is failed for its own reason, not for an empty change.
            assert!(codes.is_empty(), "{codes:?}");
        }
    }
    for (cap, term, exit, want) in cases {
        let stored = normalize_and_store(&record(cap, term, exit), &store).unwrap();
        assert_eq!(stored.manifest.outcome, want, "{term:?} {exit:?}");
        let json: serde_json::Value = serde_json::from_slice(&stored.bytes).unwrap();
        assert_eq!(
            json["authority"],
            serde_json::json!({"verification": false, "merge": false})
        );
        assert_eq!(json["schema_version"], "corral.result-manifest/v1");
        assert_eq!(stored.bytes, canonical_json(&stored.manifest));
        assert_eq!(stored.digest, Digest::of_bytes(&stored.bytes));
        assert_eq!(fs::read(&stored.path).unwrap(), stored.bytes);
        if want == Outcome::CandidateCaptured {
            assert!(stored.manifest.rejections.is_empty());
            assert_eq!(stored.manifest.ignored_paths, vec!["src/x.log".to_owned()]);
        }
        if cap.is_some_and(|c| c.patch.is_none()) {
            assert!(stored.manifest.candidate.is_none());
        }
    }
    // Extra rejections (provenance) also turn a clean capture into a rejection.
    let mut r = record(Some(&ok), Termination::Exited, Some(0));
    r.extra_rejections.push(Rejection::new(
        ReasonCode::ExecutableDigestMismatch,
        None,
        "drift",
    ));
    let stored = normalize_and_store(&r, &store).unwrap();
    assert_eq!(stored.manifest.outcome, Outcome::CandidateRejected);
    // Equal runs give equal bytes.
    let a = normalize_and_store(&record(Some(&ok), Termination::Exited, Some(0)), &store).unwrap();
    let b = normalize_and_store(&record(Some(&ok), Termination::Exited, Some(0)), &store).unwrap();
    assert_eq!(a.bytes, b.bytes);
    // Log refs record totals and truncation.
    assert_eq!(a.manifest.logs.stderr.bytes, 10);
    assert!(a.manifest.logs.stderr.truncated);
    assert!(!a.manifest.logs.stdout.truncated);
    // It parses back as a ResultManifest (deny_unknown_fields).
    let back: ResultManifest = serde_json::from_slice(&a.bytes).unwrap();
    assert_eq!(back, a.manifest);
}

#[test]
fn verify_detects_every_damage() {
    let t = tmp();
    let store = ArtifactStore::open(&t.path().join("a"), &[]).unwrap();
    let reader = store.reader();
    let ok = accepted();
    let stored =
        normalize_and_store(&record(Some(&ok), Termination::Exited, Some(0)), &store).unwrap();

    let (_, report) = verify_manifest_file(&stored.path, &reader).unwrap();
    assert!(report.intact(), "{report:?}");
    assert_eq!(report.exit_code(), 0);
    let roles: Vec<_> = report.entries.iter().map(|e| e.role).collect();
    assert_eq!(
        roles,
        vec![
            ArtifactRole::Manifest,
            ArtifactRole::Patch,
            ArtifactRole::Stdout,
            ArtifactRole::Stderr
        ]
    );

    // Tampered patch: mismatch, exit 1.
    let patch = store.path_of(&stored.manifest.candidate.as_ref().unwrap().patch.digest);
    fs::set_permissions(&patch, fs::Permissions::from_mode(0o644)).unwrap();
    fs::write(&patch, b"evil").unwrap();
    let report = verify_manifest(&stored.manifest, &reader);
    assert_eq!(report.exit_code(), 1);
    assert!(matches!(
        report.entries[0].status,
        VerifyStatus::Mismatch { .. }
    ));

    // Missing stdout log: missing, exit 1.
    fs::remove_file(&patch).unwrap();
    fs::remove_file(store.path_of(&stored.manifest.logs.stdout.digest)).unwrap();
    let report = verify_manifest(&stored.manifest, &reader);
    assert_eq!(report.entries[0].status, VerifyStatus::Missing);
    assert_eq!(report.entries[1].status, VerifyStatus::Missing);
    assert_eq!(report.exit_code(), 1);

    // A tampered manifest file is caught by its own name.
    let copy = t.path().join("copy.json");
    fs::copy(&stored.path, &copy).unwrap();
    fs::set_permissions(&stored.path, fs::Permissions::from_mode(0o644)).unwrap();
    let mut bytes = fs::read(&stored.path).unwrap();
    let at = bytes.windows(4).position(|w| w == b"wu-1").unwrap();
    bytes[at + 3] = b'2';
    fs::write(&stored.path, &bytes).unwrap();
    let (_, report) = verify_manifest_file(&stored.path, &reader).unwrap();
    assert!(matches!(
        report.entries[0].status,
        VerifyStatus::Mismatch { .. }
    ));
    // A manifest that claims authority does not even parse.
    let text = String::from_utf8(fs::read(&copy).unwrap())
        .unwrap()
        .replace("\"merge\":false", "\"merge\":true");
    fs::write(&copy, text).unwrap();
    assert!(verify_manifest_file(&copy, &reader).is_err());
}

/// The store writes beneath the directory it opened: a `sha256` folder swapped for a symlink
/// afterwards does not redirect an artifact. Control: a path-based write does follow it.
#[test]
fn a_swapped_store_directory_never_redirects_a_write() {
    let t = tmp();
    let root = t.path().join("artifacts");
    let store = ArtifactStore::open(&root, &[]).unwrap();
    let elsewhere = t.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::fs::rename(root.join("sha256"), t.path().join("moved")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, root.join("sha256")).unwrap();
    let r = store.put(b"artifact after the swap").unwrap();
    assert_eq!(
        std::fs::read_dir(&elsewhere).unwrap().count(),
        0,
        "the write followed the swapped-in symlink"
    );
    let kept = t.path().join("moved").join(r.digest.hex());
    assert_eq!(std::fs::read(&kept).unwrap(), b"artifact after the swap");
    // Control: joining the path and writing follows the link.
    std::fs::write(root.join("sha256").join("x"), b"x").unwrap();
    assert!(elsewhere.join("x").exists());
}
