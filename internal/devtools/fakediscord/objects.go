package fakediscord

import (
	"encoding/json"
	"maps"
	"strconv"
	"strings"
	"time"
)

// The objects the fake serves and dispatches, as Discord shapes them.

func (s *Server) bot() map[string]any {
	return map[string]any{"id": s.opts.BotUserID, "username": s.opts.BotName, "discriminator": "0",
		"global_name": nil, "avatar": nil, "bot": true, "public_flags": 0, "flags": 0}
}

func (s *Server) user() map[string]any {
	return map[string]any{"id": s.opts.UserID, "username": s.opts.UserName, "discriminator": "0",
		"global_name": s.opts.UserName, "avatar": nil, "public_flags": 0, "flags": 0}
}

// member is a guild member object without its user (the bot's and the user's are alike).
func (s *Server) member() map[string]any {
	m := map[string]any{"roles": []any{}, "joined_at": joinedAt, "deaf": false, "mute": false, "flags": 0,
		"pending": false, "premium_since": nil, "nick": nil, "avatar": nil, "communication_disabled_until": nil}
	return m
}

func (s *Server) memberWithUser(bot bool) map[string]any {
	m := s.member()
	if bot {
		m["user"] = s.bot()
	} else {
		m["user"] = s.user()
	}
	return m
}

func (s *Server) everyone() map[string]any {
	return map[string]any{"id": s.opts.GuildID, "name": "@everyone", "permissions": strconv.FormatInt(permissions, 10),
		"position": 0, "color": 0, "hoist": false, "managed": false, "mentionable": false, "icon": nil,
		"unicode_emoji": nil, "flags": 0}
}

func (s *Server) textChannel() map[string]any {
	return map[string]any{"id": s.opts.ChannelID, "type": 0, "guild_id": s.opts.GuildID, "name": "general",
		"position": 0, "permission_overwrites": []any{}, "nsfw": false, "topic": nil, "last_message_id": nil,
		"parent_id": nil, "rate_limit_per_user": 0, "flags": 0}
}

func (s *Server) dmChannel() map[string]any {
	return map[string]any{"id": s.opts.DMChannelID, "type": 1, "last_message_id": nil, "flags": 0,
		"recipients": []any{s.user()}}
}

// guild is the guild object of GET /guilds/{id}; full adds what GUILD_CREATE carries.
func (s *Server) guild(full bool) map[string]any {
	g := map[string]any{"id": s.opts.GuildID, "name": s.opts.GuildName, "icon": nil, "splash": nil,
		"discovery_splash": nil, "owner_id": s.opts.UserID, "afk_channel_id": nil, "afk_timeout": 300,
		"widget_enabled": false, "verification_level": 0, "default_message_notifications": 0,
		"explicit_content_filter": 0, "roles": []any{s.everyone()}, "emojis": []any{}, "stickers": []any{},
		"features": []any{}, "mfa_level": 0, "application_id": nil, "system_channel_id": s.opts.ChannelID,
		"system_channel_flags": 0, "rules_channel_id": nil, "max_members": 500000, "vanity_url_code": nil,
		"description": nil, "banner": nil, "premium_tier": 0, "premium_subscription_count": 0,
		"preferred_locale": "en-US", "public_updates_channel_id": nil, "nsfw_level": 0, "nsfw": false,
		"premium_progress_bar_enabled": false, "safety_alerts_channel_id": nil}
	if full {
		g["joined_at"] = joinedAt
		g["large"] = false
		g["unavailable"] = false
		g["member_count"] = 2
		g["voice_states"] = []any{}
		g["members"] = []any{s.memberWithUser(true)} // Discord always sends the bot's own member
		g["channels"] = []any{s.textChannel()}
		g["threads"] = []any{}
		g["presences"] = []any{}
		g["stage_instances"] = []any{}
		g["guild_scheduled_events"] = []any{}
		g["soundboard_sounds"] = []any{}
		g["lazy"] = true
	}
	return g
}

func (s *Server) application() map[string]any {
	return map[string]any{"id": s.opts.BotUserID, "name": s.opts.BotName, "icon": nil, "description": "",
		"bot_public": true, "bot_require_code_grant": false, "verify_key": strings.Repeat("0", 64),
		"flags": appFlags, "owner": s.user(), "team": nil, "bot": s.bot(), "summary": "",
		"approximate_guild_count": 1, "tags": []any{}, "redirect_uris": []any{}, "interactions_endpoint_url": nil}
}

// message is a new message object in channel by author (s.mu held).
func (s *Server) message(channel string, author map[string]any, content string) map[string]any {
	m := map[string]any{"id": s.snowflake(), "channel_id": channel, "author": author, "content": content,
		"timestamp": timestamp(time.Now()), "edited_timestamp": nil, "tts": false, "mention_everyone": false,
		"mentions": []any{}, "mention_roles": []any{}, "attachments": []any{}, "embeds": []any{},
		"pinned": false, "type": 0, "flags": 0, "components": []any{}}
	if channel == s.opts.ChannelID {
		m["guild_id"] = s.opts.GuildID
	}
	return m
}

// created stores message m and dispatches its MESSAGE_CREATE (s.mu held).
func (s *Server) created(m map[string]any) {
	s.messages[m["id"].(string)] = m
	s.dispatchMessage("MESSAGE_CREATE", m)
}

// dispatchMessage appends a MESSAGE_CREATE or MESSAGE_UPDATE of m to every session whose intents
// let it see m (s.mu held).
func (s *Server) dispatchMessage(t string, m map[string]any) {
	_, inGuild := m["guild_id"]
	author, _ := m["author"].(map[string]any)
	own := author != nil && author["id"] == s.opts.BotUserID
	mentioned := false
	for _, u := range anySlice(m["mentions"]) {
		if um, ok := u.(map[string]any); ok && um["id"] == s.opts.BotUserID {
			mentioned = true
		}
	}
	for _, sess := range s.sessions {
		need := IntentDirectMessages
		if inGuild {
			need = IntentGuildMessages
		}
		if sess.intents&need == 0 {
			continue
		}
		d := m
		if inGuild && !own && !mentioned && sess.intents&IntentMessageContent == 0 {
			d = maps.Clone(m)
			d["content"] = ""
			d["embeds"], d["attachments"], d["components"] = []any{}, []any{}, []any{}
		}
		s.appendEvent(sess, t, d)
	}
	s.notify()
}

// dispatchAll appends event t with data d to every session whose intents include need (0:
// every session) (s.mu held).
func (s *Server) dispatchAll(need int, t string, d any) {
	for _, sess := range s.sessions {
		if need == 0 || sess.intents&need != 0 {
			s.appendEvent(sess, t, d)
		}
	}
	s.notify()
}

func (s *Server) appendEvent(sess *session, t string, d any) {
	raw, _ := json.Marshal(d)
	sess.events = append(sess.events, event{t: t, d: raw})
}

func anySlice(v any) []any {
	a, _ := v.([]any)
	return a
}
