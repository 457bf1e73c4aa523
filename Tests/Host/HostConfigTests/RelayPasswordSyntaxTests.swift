import Testing
@testable import HostConfig

/// A private relay's address carries its queue-creation password:
/// `smp://<fingerprint>:<password>@host`, best given through a variable.
@Suite struct RelayPasswordSyntaxTests {
    let fingerprint = String(repeating: "A", count: 43)

    @Test func aRelayAddressMayCarryAPassword() throws {
        let (c, _) = try load(minimal + "relays:\n  - smp://\(fingerprint):${RELAY_PASSWORD}@relay.example.org:5223\n",
                              environment: ["RELAY_PASSWORD": "s3cret-pw"])
        #expect(c.relays == .external(["smp://\(fingerprint):s3cret-pw@relay.example.org:5223"]))
    }

    @Test func aMalformedPasswordIsRefused() throws {
        for bad in ["", "has space", "sl/ash"] {
            #expect(RelayAddressSyntax.problem("smp://\(fingerprint):\(bad)@relay.example.org") != nil, "\(bad)")
        }
        #expect(RelayAddressSyntax.problem("smp://\(fingerprint):ok-pw@relay.example.org") == nil)
    }
}
