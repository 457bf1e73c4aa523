import Foundation

/// A running instance as the C trampolines see it (the type is erased so one set of C functions
/// serves every plugin type).
class AnyPluginInstance {
    func handle(eventJSON: String) throws {}
    func stop() {}
}

/// One instance of a plugin type: the plugin object, its context and its compiled routes.
/// Events are dispatched here: timers to their handlers, `newChatItems` to command and message
/// handlers, then `onEvent` handlers of the event's type.
final class PluginInstance<P: Plugin>: AnyPluginInstance {
    let plugin: P
    let context: PluginContext
    let routes: Routes<P>
    let filters: [[CompiledFilter]]

    init(plugin: P, context: PluginContext, routes: Routes<P>, filters: [[CompiledFilter]]) {
        self.plugin = plugin
        self.context = context
        self.routes = routes
        self.filters = filters
    }

    /// Decodes the config, makes the plugin, compiles its filters and publishes its commands.
    static func start(context: PluginContext, configJSON: String) throws -> PluginInstance<P> {
        var routes = Routes<P>()
        P.routes(&routes)
        let filters = try routes.compileFilters()
        let config = try decodeConfig(configJSON)
        let plugin = try P(config: config, context: context)
        let instance = PluginInstance(plugin: plugin, context: context, routes: routes, filters: filters)
        let menu = routes.commandRoutes.filter { $0.enabled(plugin) }.map(\.command)
        if !routes.commandRoutes.isEmpty { try context.setCommands(menu) }
        return instance
    }

    /// The config as `P.Config`; a failure names the field (`config.rules[1].reply: missing`).
    static func decodeConfig(_ json: String) throws(PluginError) -> P.Config {
        let text = json.isEmpty ? "{}" : json
        // Strict first: JSONDecoder would take `1e999` as infinity and let a repeated key pass.
        do { _ = try JSONValue.parse(text, as: .config) } catch { throw PluginError(.config, "config: \(error.message)") }
        do {
            return try JSONDecoder().decode(P.Config.self, from: Data(text.utf8))
        } catch let error as DecodingError {
            throw PluginError(.config, "config.\(JSONValue.describe(error))".replacingOccurrences(of: "config.$", with: "config"))
        } catch {
            throw PluginError(.config, "config: \(error)")
        }
    }

    override func handle(eventJSON: String) throws {
        let event = try ChatEvent(parsing: eventJSON)
        if event.type == "swiftplex.timer" {
            guard let id = event.json["timerId"]?.int64Value, id > 0 else { throw PluginError(.event, "a timer event without timerId") }
            _ = try context.fireTimer(UInt64(id))
            return
        }
        var failures: [String] = []
        func run(_ what: @autoclosure () -> String, _ body: () throws -> Void) {
            do { try body() } catch { failures.append("\(what()): \(error)") }
        }
        if event.type == "newChatItems" {
            for message in event.messages {
                if let (keyword, args, text) = CommandInvocation.parse(message.text),
                   let route = routes.commandRoutes.first(where: { $0.command.keyword == keyword && $0.enabled(plugin) }) {
                    let invocation = CommandInvocation(keyword: keyword, arguments: args, argumentText: text, message: message)
                    run("/\(keyword) handler") { try route.handler(plugin, invocation) }
                    continue
                }
                for (i, route) in routes.messageRoutes.enumerated() where filters[i].allSatisfy({ $0.matches(message) }) {
                    run("onMessage handler \(i + 1)") { try route.handler(plugin, message) }
                }
            }
        }
        for route in routes.eventRoutes where route.type == event.type || route.type == "*" {
            run("\(route.type) handler") { try route.handler(plugin, event) }
        }
        if !failures.isEmpty { throw PluginError(.plugin, failures.joined(separator: "; ")) }
    }

    override func stop() {
        plugin.stop()
        context.close()
    }
}
