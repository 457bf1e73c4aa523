import Crypto
import Foundation
import NIOSSL
import RelayProtocol
import SwiftASN1
import SwiftplexCrypto
import X509

/// The relay's long-term TLS identity: a self-signed P-256 certificate created on first start.
///
/// The SHA-256 of the certificate's DER bytes is the relay's fingerprint, the part of its
/// `smp://` address that clients pin.
public struct RelayIdentity: Sendable {
    public let certificateDER: [UInt8]
    let privateKeyPEM: String

    public var fingerprint: [UInt8] { Digest.sha256(certificateDER) }

    static let certificateFile = "identity.crt"
    static let keyFile = "identity.key"

    /// Loads the identity from `directory`, creating it (and the directory, 0700) on first use.
    /// Identity files are written 0600.
    public static func loadOrCreate(in directory: URL) throws -> RelayIdentity {
        try DataDirectory.prepare(directory)
        let certURL = directory.appendingPathComponent(certificateFile)
        let keyURL = directory.appendingPathComponent(keyFile)
        let fm = FileManager.default
        if fm.fileExists(atPath: certURL.path) || fm.fileExists(atPath: keyURL.path) {
            do {
                let certPEM = try String(contentsOf: certURL, encoding: .utf8)
                let keyPEM = try String(contentsOf: keyURL, encoding: .utf8)
                let doc = try PEMDocument(pemString: certPEM)
                _ = try Certificate(derEncoded: doc.derBytes) // validates it parses
                _ = try P256.Signing.PrivateKey(pemRepresentation: keyPEM)
                return RelayIdentity(certificateDER: doc.derBytes, privateKeyPEM: keyPEM)
            } catch {
                throw RelayServerError(.identity, "cannot load the relay identity from \(directory.path) (\(certificateFile), \(keyFile)): \(error)")
            }
        }
        let identity = try generate()
        let certPEM = PEMDocument(type: "CERTIFICATE", derBytes: identity.certificateDER).pemString
        try DataDirectory.writePrivateFile(keyURL, contents: Data(identity.privateKeyPEM.utf8))
        try DataDirectory.writePrivateFile(certURL, contents: Data(certPEM.utf8))
        return identity
    }

    /// A fresh identity (not saved anywhere).
    public static func generate() throws -> RelayIdentity {
        let key = P256.Signing.PrivateKey()
        let name = try DistinguishedName {
            CommonName("swiftplex relay")
        }
        let now = Date()
        let certificate = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: .init(key.publicKey),
            notValidBefore: now.addingTimeInterval(-3600),
            notValidAfter: now.addingTimeInterval(20 * 365 * 24 * 3600),
            issuer: name,
            subject: name,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(digitalSignature: true, keyCertSign: true))
            },
            issuerPrivateKey: .init(key)
        )
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        return RelayIdentity(certificateDER: serializer.serializedBytes, privateKeyPEM: key.pemRepresentation)
    }

    /// A TLS 1.3-only server context presenting this identity.
    public func makeServerTLSContext() throws -> NIOSSLContext {
        let cert = try NIOSSLCertificate(bytes: certificateDER, format: .der)
        let key = try NIOSSLPrivateKey(bytes: Array(privateKeyPEM.utf8), format: .pem)
        var tls = TLSConfiguration.makeServerConfiguration(certificateChain: [.certificate(cert)], privateKey: .privateKey(key))
        tls.minimumTLSVersion = .tlsv13
        tls.maximumTLSVersion = .tlsv13
        return try NIOSSLContext(configuration: tls)
    }
}

/// Creation of the data directory and of private files in it.
enum DataDirectory {
    static func prepare(_ directory: URL) throws {
        let fm = FileManager.default
        var isDir: ObjCBool = false
        if fm.fileExists(atPath: directory.path, isDirectory: &isDir) {
            guard isDir.boolValue else {
                throw RelayServerError(.dataDirectory, "\(directory.path) exists and is not a directory")
            }
        } else {
            do {
                try fm.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            } catch {
                throw RelayServerError(.dataDirectory, "cannot create data directory \(directory.path): \(error.localizedDescription)")
            }
        }
        try? fm.setAttributes([.posixPermissions: 0o700], ofItemAtPath: directory.path)
    }

    /// Writes `contents` to `url` atomically with mode 0600.
    static func writePrivateFile(_ url: URL, contents: Data) throws {
        let tmp = url.appendingPathExtension("tmp")
        let fd = open(tmp.path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        guard fd >= 0 else {
            throw RelayServerError(.dataDirectory, "cannot write \(tmp.path): \(String(cString: strerror(errno)))")
        }
        let ok = contents.withUnsafeBytes { raw -> Bool in
            var offset = 0
            while offset < raw.count {
                let n = write(fd, raw.baseAddress! + offset, raw.count - offset)
                if n <= 0 { return false }
                offset += n
            }
            return fsync(fd) == 0
        }
        close(fd)
        guard ok, rename(tmp.path, url.path) == 0 else {
            unlink(tmp.path)
            throw RelayServerError(.dataDirectory, "cannot write \(url.path)")
        }
    }

    /// Ensures a database file exists with mode 0600 before SQLite opens it (SQLite's WAL and
    /// shared-memory files inherit the database file's mode).
    static func touchPrivateFile(_ url: URL) throws {
        let fd = open(url.path, O_RDWR | O_CREAT, 0o600)
        guard fd >= 0 else {
            throw RelayServerError(.dataDirectory, "cannot create \(url.path): \(String(cString: strerror(errno)))")
        }
        fchmod(fd, 0o600)
        close(fd)
    }
}
