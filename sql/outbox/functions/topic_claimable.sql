-- outbox.topic_claimable (function), its current definition: outboxctl migrate re-applies
-- this file after the numbered migrations (sql/README.md). History: 012.
--
-- Whether the claim may take topic: named in include, or, with others,
-- not named in exclude (the relay's routing and breakers, relay/claim.c).
CREATE OR REPLACE FUNCTION outbox.topic_claimable(topic text, include text[], exclude text[],
                                       others boolean)
    RETURNS boolean
    LANGUAGE sql IMMUTABLE AS
    'SELECT topic = ANY(COALESCE(include, ''{}'')) OR (others AND NOT (topic = ANY(COALESCE(exclude, ''{}''))))';
