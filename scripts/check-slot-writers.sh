#!/usr/bin/env bash
# check-slot-writers.sh - one writer per state: a pipeline slot's fields
# (struct relay_slot, and a worker's struct relay_slots) change only in
# relay/slot.c's slot_enter (and its lifecycle pair relay_slots_init /
# relay_slots_fini), and a circuit breaker's fields (struct relay_breaker)
# only in relay/breaker.c. Reads the programs' C sources (common, producer,
# relay, consumer, ctl, tools) and the protocol checker's (tests/check,
# which drives the slots through relay_slot_step too); the field names come from the structs in
# relay/slot.h and relay/breaker.h.
#
# A write is an assignment (=, +=, ...), ++ or -- of a field reached
# through a slot, a worker's slots or a breaker, or a memset of one:
# through a variable declared as one in the same function
# (struct relay_slot *s), an element of a slots' array (->slot[i]), a
# worker's slots (->slots.used), or a breaker member (->breaker.probing).
# What a function writes through a pointer it was handed (relay_frame_send
# filling s->outcomes' entries as its out array, the claim filling
# s->f.batch) is the callee's business and not seen: the slot lends those
# on purpose. Prints one line per write outside its owner; exit 1 if any.
set -uo pipefail
cd "${OUTBOX_LINT_ROOT:-$(dirname "$0")/..}" # OUTBOX_LINT_ROOT: another tree (the negative test)
command -v perl >/dev/null || { echo "check-slot-writers: perl is not installed" >&2; exit 1; }

exec perl -e '
use strict;
use warnings;

my $fail = 0;
sub problem { print STDERR "check-slot-writers: @_\n"; $fail = 1; }
sub slurp { my ($f) = @_; open(my $h, "<", $f) or return undef; local $/; return <$h>; }

# The fields of a struct, from its definition in a header.
sub fields {
	my ($file, $name) = @_;
	my $t = slurp($file);
	if (!defined $t) { problem("cannot read $file"); return (); }
	$t =~ s{/\*.*?\*/}{}gs;
	if ($t !~ /struct\s+$name\s*\{(.*?)\};/s) { problem("$file: no struct $name"); return (); }
	my $body = $1;
	my @f;
	for my $decl (split /;/, $body) {
		push @f, $1 while $decl =~ /\**\s*(\w+)\s*(?:\[[^\]]*\])?\s*(?:,|$)/g;
	}
	return grep { $_ ne "" } @f;
}

# what => [owner file, owner functions, field names]
my %owned = (
	"slot"     => ["relay/slot.c", { slot_enter => 1, relay_slots_init => 1, relay_slots_fini => 1 },
	               [fields("relay/slot.h", "relay_slot")]],
	"slots"    => ["relay/slot.c", { slot_enter => 1, relay_slots_init => 1, relay_slots_fini => 1 },
	               [fields("relay/slot.h", "relay_slots")]],
	"breaker"  => ["relay/breaker.c", undef, [fields("relay/breaker.h", "relay_breaker")]],
);
for my $k (keys %owned) { problem("no fields found for struct relay_$k") unless @{$owned{$k}[2]}; }

my $assign = qr/(?:=(?!=)|\+=|-=|\*=|\/=|%=|\|=|&=|\^=|<<=|>>=|\+\+|--)/;
my $tail = qr/(?:\s*(?:\[[^\]]*\]|(?:->|\.)\s*\w+))*/;

my @files = sort split /\n/, `find common producer relay consumer ctl tools tests/check -name "*.[ch]" -type f 2>/dev/null`;
for my $f (@files) {
	my $t = slurp($f);
	next unless defined $t;
	$t =~ s{/\*.*?\*/}{ }gs;
	$t =~ s{//[^\n]*}{}g;
	$t =~ s/"(?:[^"\\\n]|\\.)*"/""/g;
	# functions: a name at the start of a line, its arguments, a brace at the start of a line
	while ($t =~ /^(\w+)\s*\(([^;{]*?)\)\s*\n\{\n(.*?)^\}/msg) {
		my ($fn, $args, $body) = ($1, $2, $3);
		my $text = "$args;\n$body";
		for my $what (keys %owned) {
			my ($file, $fns, $flds) = @{$owned{$what}};
			next if $f eq $file && (!defined $fns || $fns->{$fn});
			my $type = "relay_$what";
			my @vars;
			push @vars, $1 while $text =~ /\bstruct\s+$type\b\s*(?:\*\s*(?:const\s+)?)?(\w+)/g;
			# how a $what is reached: a variable, or a member of something
			my @roots = map { "\\b$_\\b" } @vars; # C names: nothing to quote
			push @roots, "(?:->|\\.)\\s*slot\\s*\\[[^\\]]*\\]" if $what eq "slot";
			push @roots, "(?:->|\\.)\\s*slots\\b" if $what eq "slots";
			push @roots, "(?:->|\\.)\\s*breaker\\b" if $what eq "breaker";
			next unless @roots;
			my $root = join("|", @roots);
			my $field = join("|", @{$flds});
			my $who = defined $fns ? "only " . join(", ", sort keys %$fns) . " in $file"
			                       : "only $file";
			while ($text =~ /(?:$root)\s*(?:->|\.)\s*($field)\b$tail\s*$assign/g) {
				problem("$f: $fn writes a $what field ($1), which $who may write");
			}
			while ($text =~ /(?:\+\+|--)\s*(?:$root)\s*(?:->|\.)\s*($field)\b/g) {
				problem("$f: $fn writes a $what field ($1), which $who may write");
			}
			while ($text =~ /\bmemset\s*\(\s*&?\s*(?:$root)/g) {
				problem("$f: $fn clears a $what, which $who may write");
			}
		}
	}
}
exit $fail;
'
