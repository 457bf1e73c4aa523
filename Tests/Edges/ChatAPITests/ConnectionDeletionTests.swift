import ChatCore
import ChatTestSupport
import Foundation
import GRDB
import Testing
@testable import ChatAPI

/// A contact that deleted us leaves its agent connection to be deleted; a deletion that a
/// shutdown or a crash cut short is done again at the next start, never lost.
@Suite(.timeLimit(.minutes(2))) struct ConnectionDeletionTests: LiveRelaySuite {
    @Test func aDeletionCutShortByAStopIsDoneAgainAtTheNextStart() async throws {
        try await withLiveRelay { dir, relay in
            try await withEngine(dir, "ben", relays: [relay.address]) { ben, benInbox in
                let (benInAnna, annaInBen) = try await withEngine(dir, "anna", relays: [relay.address]) { anna, annaInbox in
                    try await connectPair(anna, annaInbox, ben, benInbox)
                }
                // Anna's engine stored ben's `x.direct.del` (the contact is `deleted`) and stopped
                // before its agent deleted the connection.
                let chat = try sideConnection(dir.appendingPathComponent("anna_chat.db").path)
                try await chat.write { db in
                    try db.execute(sql: "UPDATE contact SET status = 'deleted' WHERE id = ?", arguments: [benInAnna])
                }
                try chat.close()

                let anna = try await ChatController.open(prefix: dir.appendingPathComponent("anna").path, defaultRelays: [relay.address], logger: silent)
                await anna.resumeConnectionDeletions()
                await anna.close()

                // Anna's queue is gone from the relay: what ben sends her now is refused there.
                let sent = await ben.execute(#"/_send @\#(annaInBen) json [{"msgContent": {"type": "text", "text": "still there?"}, "mentions": {}}]"#)
                #expect(sent["type"]?.stringValue == "newChatItems")
                let refused = try await benInbox.next("chatItemsStatusesUpdated") {
                    $0["chatItems"]?.description.contains(#""type":"sndErrorAuth""#) == true
                }
                #expect(refused["chatItems"]?.description.contains("still there?") == true)
            }
        }
    }
}
