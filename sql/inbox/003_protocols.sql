-- 003_protocols.sql: which protocol versions of the consumer this inbox
-- schema serves. The consumer checks its own at start and after every
-- reconnect (inbox.check_protocol) and refuses, with one line, a schema
-- that does not serve it (docs/consumer.md).
CREATE TABLE inbox.protocols (
    component   text    PRIMARY KEY,
    min_version integer NOT NULL,
    max_version integer NOT NULL,
    CHECK (min_version <= max_version)
);
-- consumer 1: the dedup record and the effect in one transaction (001, 002).
INSERT INTO inbox.protocols VALUES ('consumer', 1, 1);

-- Raises SQLSTATE OB001 when this schema does not serve component at
-- version; the message says which side to upgrade.
CREATE FUNCTION inbox.check_protocol(component text, version integer) RETURNS void
    LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_variable
DECLARE
    p inbox.protocols;
BEGIN
    SELECT * INTO p FROM inbox.protocols x WHERE x.component = component;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'inbox schema does not know component "%"', component
            USING ERRCODE = 'OB001';
    ELSIF version < p.min_version THEN
        RAISE EXCEPTION 'inbox schema serves % protocol %..%, this program speaks %: upgrade the program',
            component, p.min_version, p.max_version, version USING ERRCODE = 'OB001';
    ELSIF version > p.max_version THEN
        RAISE EXCEPTION 'inbox schema serves % protocol %..%, this program speaks %: run outboxctl migrate',
            component, p.min_version, p.max_version, version USING ERRCODE = 'OB001';
    END IF;
END
$$;
