import Testing
@testable import HostConfig

@Suite struct InterpolationTests {
    let env = ["NAME": "Echo Bot", "TOKEN": "s3cr3t-t0ken", "EMPTY": "", "LIMIT": "25"]

    func substituted(_ text: String) throws -> String {
        try Interpolation.substitute(text, env).get().0
    }

    @Test func substitutesInsideLongerStrings() throws {
        #expect(try substituted("${NAME}") == "Echo Bot")
        #expect(try substituted("I am ${NAME}, limit ${LIMIT}.") == "I am Echo Bot, limit 25.")
        #expect(try substituted("${NAME}${LIMIT}") == "Echo Bot25")
        #expect(try Interpolation.substitute("a ${NAME} b ${LIMIT}", env).get().1 == ["NAME", "LIMIT"])
    }

    @Test func defaultsApplyWhenUnsetOrEmpty() throws {
        #expect(try substituted("${MISSING:-fallback}") == "fallback")
        #expect(try substituted("${EMPTY:-was empty}") == "was empty")
        #expect(try substituted("${NAME:-unused}") == "Echo Bot")
        #expect(try substituted("${MISSING:-}") == "")
        #expect(try substituted("${MISSING:-a:-b}") == "a:-b")
        #expect(try Interpolation.substitute("${MISSING:-fallback}", env).get().1.isEmpty)
        #expect(try substituted("${EMPTY}") == "")
    }

    @Test func escapesAndLoneDollars() throws {
        #expect(try substituted("$${NAME}") == "${NAME}")
        #expect(try substituted("costs $5 or $$5, $") == "costs $5 or $$5, $")
        // Left to right: a lone `$`, then the escape `$${` → `${`.
        #expect(try substituted("$$${NAME}") == "$${NAME}")
        #expect(try Interpolation.substitute("$${NAME}", env).get().1.isEmpty)
    }

    @Test func badReferencesAreErrors() throws {
        #expect(throws: Interpolation.Problem.self) { try Interpolation.substitute("${NAME", env).get() }
        #expect(throws: Interpolation.Problem.self) { try Interpolation.substitute("${1X}", env).get() }
        #expect(throws: Interpolation.Problem.self) { try Interpolation.substitute("${}", env).get() }
        #expect(throws: Interpolation.Problem.self) { try Interpolation.substitute("${A B}", env).get() }
    }

    @Test func valuesOfTheFileAreInterpolatedWithTypes() throws {
        let yaml = """
            bot:
              display_name: "${NAME}"
              full_name: Bot of ${NAME:-nobody} for $${HOME}
            plugins:
              - name: p
                path: p
                queue_limit: ${LIMIT}
                config:
                  token: ${TOKEN}
                  ${NAME}: keys are not interpolated
            """
        let (config, _) = try load(yaml, environment: env)
        #expect(config.bot.displayName == "Echo Bot")
        #expect(config.bot.fullName == "Bot of Echo Bot for ${HOME}")
        #expect(config.plugins[0].queueLimit == 25)
        #expect(config.plugins[0].config["token"]?.scalar == "s3cr3t-t0ken")
        #expect(config.plugins[0].config["token"]?.substitutedVariables == ["TOKEN"])
        #expect(config.plugins[0].config["${NAME}"]?.scalar == "keys are not interpolated")
    }

    @Test func unsetVariablesAreErrorsAtTheirNode() throws {
        let yaml = """
            bot:
              display_name: ${BOT_NAME}
            plugins:
              - name: p
                path: p
                config:
                  greeting: "Hi ${USER_NAME}"
                  bad: ${not closed
                  odd: ${9LIVES}
            """
        #expect(try problems(yaml, environment: env) == [
            "2:17: environment variable BOT_NAME is not set (use ${BOT_NAME:-default} for a default)",
            "7:17: environment variable USER_NAME is not set (use ${USER_NAME:-default} for a default)",
            "8:12: unclosed ${ in a value (write $${ for a literal ${)",
            "9:12: \"${9LIVES}\" is not a variable reference: a name is letters, digits and _, not starting with a digit (write $${ for a literal ${)",
        ])
    }

    @Test func secretsNeverAppearInMessages() throws {
        let secret = env["TOKEN"]!
        let yaml = """
            log_level: ${TOKEN}
            bot:
              display_name: "#${TOKEN}"
              peer_type: ${TOKEN}
            relays:
              - smp://${TOKEN}@relay.example.org
            embedded_relay:
              listen: ${TOKEN}
            plugins:
              - name: p
                path: p
                timeout: ${TOKEN}
                queue_limit: x${TOKEN}
            """
        let dir = try TempDirectory()
        let file = try dir.write("bot.yaml", yaml)
        do {
            _ = try HostConfiguration.load(path: file, environment: env)
            Issue.record("expected errors")
        } catch {
            #expect(error.problems.count == 7)
            #expect(!error.description.contains(secret))
            #expect(!error.description.contains("s3cr3t"))
            #expect(error.description.contains("${TOKEN}"))
            #expect(error.problems[0].message == "log_level: expected one of trace, debug, info, notice, warning, error, critical; got the value substituted from ${TOKEN}")
        }
    }
}
