-- A turn reads its conversation's newest entries (up to agent.history_limit,
-- 200). Rows are stored in id order, so with many chats writing at once a
-- conversation's entries lie one to a page: reading 200 of them fetched some
-- 200 pages, each copied from the file again because a reader's page cache
-- starts empty whenever another connection wrote. This index holds every
-- column the history read returns, ordered by conversation, so the read is a
-- few neighbouring pages of the index and never visits the table; it
-- replaces `messages_by_conversation`, whose leading columns it has, so a
-- message still updates one index for its conversation. It costs the
-- entries' text stored a second time in the file.
CREATE INDEX messages_history ON messages (conversation_id, id, task_id, role, actor, text, at);
DROP INDEX messages_by_conversation;
