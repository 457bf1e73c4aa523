extension HostConfiguration {
    /// The commented starter config that `swiftplex init` writes: a working bot with an embedded
    /// relay that greets new contacts and echoes messages. Every key is explained; the values are
    /// the defaults unless a comment says otherwise. `config/bot.yaml` is this text with
    /// `data_dir: ../.swiftplex/bot`.
    public static let starterTemplate = """
        # Swiftplex bot host configuration (read by `swiftplex run --config FILE`).
        # Check it with `swiftplex check-config FILE`: every problem is reported as FILE:LINE:COLUMN.
        # Any value may use ${ENV_VAR} or ${ENV_VAR:-default} (write $${ for a literal ${), so
        # secrets can stay in the environment. The full reference is docs/configuration.md.

        # Where the bot keeps its databases, its embedded relay's data and plugin storage.
        # A relative path is relative to this file's directory.
        data_dir: .swiftplex/bot

        # trace, debug, info, notice, warning, error or critical. Logs never hold message texts or keys.
        log_level: info

        # The bot's profile, created on first start. (Several bots in one host: replace bot, address
        # and plugins with a bots: list; see config/several-bots.yaml and docs/configuration.md.)
        bot:
          display_name: Swiftplex Bot     # required; must not start with @ or #
          full_name: ""                   # optional longer name
          peer_type: bot                  # bot or human: how clients show this profile
          publish_commands: true          # put the plugins' commands into the profile's command menu

        # `embedded` runs a relay inside the host (see embedded_relay) and prints its address;
        # or list external relays:
        #   relays:
        #     - smp://<fingerprint>@relay.example.org:5223
        relays: embedded

        # Only used with `relays: embedded`.
        embedded_relay:
          listen: 127.0.0.1:5223          # host:port to listen on (port 0 picks a free port)
          public_host: null               # host name put into the relay's address instead of the listen host

        # The bot's contact address: people connect to the bot through it.
        address:
          enabled: true                   # create it at first start, reuse it afterwards
          print_qr: true                  # also print it as a QR code in the terminal

        # Relays that people's links (contact requests, invitations) may make the bot dial. Any by
        # default; a public bot may list the relays it trusts and refuse private addresses.
        #   peer_relays:
        #     allow: [smp.example.org]        # host or host:port, as written in links
        #     refuse_private: true            # no loopback, private, link-local addresses
        #     timeout: 30s                    # the most a join waits on a peer's relay

        # Extra directories searched for plugins given by name (relative to this file's directory).
        plugin_dirs: []

        # Plugins, started in this order. Each entry:
        #   name:        unique instance name: lower-case letters, digits, _ and -
        #   path:        a plugin name (looked up as lib<name>.so) or a path containing / or ending in .so
        #   enabled:     true (default) or false
        #   isolation:   in-process (default) or process (own child process; a crash cannot hurt the host)
        #   timeout:     per-event handler timeout: 250ms, 5s (default), 2m, 1h
        #   queue_limit: events queued for the plugin before new ones are dropped (default 1000)
        #   restart_backoff: {initial: 1s, max: 1m}   restart delays of a crashed isolated plugin
        #   config:      the plugin's own settings, checked against the schema the plugin declares
        # The same path may be loaded twice under different names with different configs.
        plugins:
          # auto-accept accepts contact requests and greets new contacts. Its config:
          #   welcome: text sent to every new contact
          #   allow: [glob, ...]      accept only display names matching one of these (default: all)
          #   deny: [glob, ...]       reject display names matching one of these
          #   max_per_hour: 0         new contacts accepted per hour (0 = no cap)
          #   accept_incognito: false accept requests from incognito profiles
          #   rejection_notice: text sent to a rejected requester (default: none)
          - name: welcome
            path: auto-accept
            config:
              welcome: "Hello! I am a Swiftplex bot. Every message you send me comes back."

          # auto-reply answers messages. Its config:
          #   echo: true              send every message back
          #   rules: [{keyword: hi, reply: Hello!}, {regex: "^price", reply: ...}]
          #   help: true              answer /help with the list of rules
          - name: echo
            path: auto-reply
            config:
              echo: true

          # broadcast forwards messages from admins to every contact. Its config:
          #   admins: ["<contact id>:<local display name>", ...]   e.g. "1:alice"; the id and the
          #           name the bot's database gives the contact must both match (the log shows ids)
          #   notice: text sent to non-admins who write to the bot
          # - name: announcements
          #   path: broadcast
          #   config:
          #     admins: ["1:alice"]
          #     notice: "This bot only forwards announcements."

          # group-moderator keeps the groups the bot is in (docs/plugins.md has every key). Its config:
          #   accept_invitations: true  join every group the bot is invited to
          #   groups: per-group rules, the first entry whose match fits the group's name applies:
          #     - match: "*"            group display-name pattern
          #       welcome: "Welcome to {group}, {name}!"
          #       blocked_words: [scam]  blocked_patterns: ['(?i)free\\s+crypto']
          #       new_member_seconds: 3600   new_members_no_links: true   new_members_no_media: true
          #       rate_limit: {messages: 5, seconds: 10}
          #       block_after: 0  remove_after: 3   strikes before blocking / removing (0 = never)
          # The bot must be a moderator in the group to delete and block, an admin to remove.
          # - name: moderator
          #   path: group-moderator
          #   config:
          #     groups:
          #       - welcome: "Welcome to {group}, {name}!"
          #         blocked_words: [scam]

        """
}
