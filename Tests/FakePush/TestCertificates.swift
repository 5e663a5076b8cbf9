import Crypto
import Foundation
import NIOSSL
import SwiftASN1
import X509

/// A certificate authority made for one run, and a server certificate it signed for 127.0.0.1
/// and localhost: the fake providers serve TLS with it, and the push client trusts the CA
/// through `APNS_CA_FILE`, as it would a private gateway's.
package struct TestCertificates: Sendable {
    package let caFile: String
    package let serverConfiguration: TLSConfiguration

    package static func make(in directory: URL) throws -> TestCertificates {
        let now = Date()
        let caKey = P256.Signing.PrivateKey()
        let caName = try DistinguishedName { CommonName("Bookworm test CA") }
        let ca = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(caKey.publicKey),
            notValidBefore: now.addingTimeInterval(-3600), notValidAfter: now.addingTimeInterval(7 * 86400),
            issuer: caName, subject: caName, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                Critical(KeyUsage(keyCertSign: true))
            },
            issuerPrivateKey: .init(caKey))
        let serverKey = P256.Signing.PrivateKey()
        let server = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(serverKey.publicKey),
            notValidBefore: now.addingTimeInterval(-3600), notValidAfter: now.addingTimeInterval(7 * 86400),
            issuer: caName, subject: try DistinguishedName { CommonName("127.0.0.1") }, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.serverAuth])
                SubjectAlternativeNames([.dnsName("localhost"), .ipAddress(ASN1OctetString(contentBytes: [127, 0, 0, 1]))])
            },
            issuerPrivateKey: .init(caKey))
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let caFile = directory.appendingPathComponent("ca.pem")
        try Data(try ca.serializeAsPEM().pemString.utf8).write(to: caFile)
        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: [.certificate(try NIOSSLCertificate(bytes: Array(try server.serializeAsPEM().pemString.utf8), format: .pem))],
            privateKey: .privateKey(try NIOSSLPrivateKey(bytes: Array(serverKey.pemRepresentation.utf8), format: .pem)))
        // HTTP/2 only, as Apple's service: a client that cannot speak it fails here.
        tls.applicationProtocols = ["h2"]
        return TestCertificates(caFile: caFile.path, serverConfiguration: tls)
    }
}
