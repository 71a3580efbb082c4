-- inbox.check_protocol (function), its current definition: outboxctl migrate re-applies
-- this file after the numbered migrations (sql/README.md). History: 003.
--
-- Raises SQLSTATE OB001 when this schema does not serve component at
-- version; the message says which side to upgrade.
CREATE OR REPLACE FUNCTION inbox.check_protocol(component text, version integer) RETURNS void
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
