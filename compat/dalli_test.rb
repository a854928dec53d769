#!/usr/bin/env ruby
# Compatibility test: Dalli (Debian's ruby-dalli 3.0.x), which speaks only the
# binary protocol and batches with quiet opcodes (`multi` blocks, get_multi).
#
# Usage: dalli_test.rb --port PORT [--host 127.0.0.1]
#                      [--sasl-port PORT --user USER --password PASSWORD]
#
# With --sasl-port, also runs the SASL checks against that server (started with
# -S and credentials USER:PASSWORD): the right password works, a wrong one fails.
# Every check is an assertion; each test prints PASS/FAIL and the script exits
# non-zero if any fails.

require 'dalli'
require 'logger'
require 'optparse'

Dalli.logger = Logger.new($stderr)
Dalli.logger.level = Logger::ERROR

opts = { host: '127.0.0.1' }
OptionParser.new do |o|
  o.on('--host HOST') { |v| opts[:host] = v }
  o.on('--port PORT', Integer) { |v| opts[:port] = v }
  o.on('--sasl-port PORT', Integer) { |v| opts[:sasl_port] = v }
  o.on('--user USER') { |v| opts[:user] = v }
  o.on('--password PASSWORD') { |v| opts[:password] = v }
end.parse!
abort 'dalli_test.rb: --port is required' unless opts[:port]

class Failed < StandardError; end

def check(cond, what)
  raise Failed, what unless cond
end

def eq(got, want, what)
  raise Failed, "#{what}: got #{got.inspect}, want #{want.inspect}" unless got == want
end

def client(host, port, **extra)
  Dalli::Client.new("#{host}:#{port}",
                    { socket_timeout: 5, socket_max_failures: 1, down_retry_delay: 0.1, compress: false }.merge(extra))
end

TESTS = []
def test(name, &blk)
  TESTS << [name, blk]
end

test 'set/get/add/replace/delete' do |c|
  check c.set('dalli:a', 'alpha'), 'set'
  eq c.get('dalli:a'), 'alpha', 'get'
  eq c.get('dalli:missing'), nil, 'miss'
  # Ruby objects are marshalled: flags carry the serializer bit.
  check c.set('dalli:obj', { 'x' => [1, 2, 3] }), 'set object'
  eq c.get('dalli:obj'), { 'x' => [1, 2, 3] }, 'get object'
  eq c.add('dalli:a', 'again'), false, 'add existing'
  check c.add('dalli:b', 'beta'), 'add new'
  check c.replace('dalli:b', 'BETA'), 'replace existing'
  # Dalli 3.0.6 returns 0 (not a CAS) for a replace that found nothing,
  # against memcached too.
  r = c.replace('dalli:none', 'x')
  check !(r.is_a?(Integer) && r.positive?), "replace missing returned #{r.inspect}"
  eq c.get('dalli:none'), nil, 'replace missing stored nothing'
  eq c.get('dalli:b'), 'BETA', 'replaced'
  check c.delete('dalli:b'), 'delete'
  check !c.delete('dalli:b'), 'delete missing'
  eq c.get('dalli:b'), nil, 'deleted'
end

test 'get_multi (GETKQ pipeline + NOOP)' do |c|
  keys = (0...200).map { |i| "dalli:m:#{i}" }
  keys.each_with_index { |k, i| c.set(k, "v#{i}") if i.even? }
  got = c.get_multi(*keys)
  eq got.size, 100, 'hits'
  keys.each_with_index do |k, i|
    eq got[k], (i.even? ? "v#{i}" : nil), k
  end
  eq c.get_multi, {}, 'empty get_multi'
end

test 'multi block (quiet sets)' do |c|
  c.multi do
    1000.times { |i| c.set("dalli:q:#{i}", "quiet#{i}") }
    c.delete('dalli:q:0')
  end
  eq c.get('dalli:q:999'), 'quiet999', 'last quiet set'
  eq c.get('dalli:q:0'), nil, 'quiet delete'
  got = c.get_multi(*(1...1000).map { |i| "dalli:q:#{i}" })
  eq got.size, 999, 'all quiet sets stored'
end

test 'cas' do |c|
  c.set('dalli:cas', 10)
  check c.cas('dalli:cas') { |v| v + 1 }, 'cas'
  eq c.get('dalli:cas'), 11, 'cas result'
  eq c.cas('dalli:nocas') { |v| v }, nil, 'cas on a miss'
  value, cas = c.get_cas('dalli:cas')
  eq value, 11, 'get_cas value'
  check cas.is_a?(Integer) && cas > 0, 'get_cas cas'
  c.set('dalli:cas', 12)
  eq c.set_cas('dalli:cas', 99, cas), false, 'stale cas refused'
  _, cas = c.get_cas('dalli:cas')
  check c.set_cas('dalli:cas', 99, cas), 'current cas'
  eq c.get('dalli:cas'), 99, 'set_cas result'
end

test 'incr/decr' do |c|
  eq c.incr('dalli:n', 1), nil, 'incr missing without default'
  eq c.incr('dalli:n', 1, nil, 5), 5, 'incr creates with default'
  eq c.incr('dalli:n', 10), 15, 'incr'
  eq c.decr('dalli:n', 20), 0, 'decr stops at 0'
  eq c.decr('dalli:d', 1, nil, 7), 7, 'decr creates'
  # memcached rewrites a shrinking counter in place, padded with spaces.
  eq c.get('dalli:n', raw: true), '0 ', 'counter as text'
end

test 'append/prepend (raw)' do |c|
  c.set('dalli:ap', 'mid', nil, raw: true)
  check c.append('dalli:ap', '>'), 'append'
  check c.prepend('dalli:ap', '<'), 'prepend'
  eq c.get('dalli:ap', raw: true), '<mid>', 'append/prepend result'
  eq c.append('dalli:apnone', 'x'), false, 'append missing'
end

test 'touch and ttl' do |c|
  c.set('dalli:t', 'v', 100)
  check c.touch('dalli:t', 1000), 'touch'
  eq c.touch('dalli:tnone', 10), nil, 'touch missing'
  if c.respond_to?(:gat)
    eq c.gat('dalli:t', 1000), 'v', 'gat'
  end
  c.set('dalli:exp', 'v', 1)
  sleep 2.1
  eq c.get('dalli:exp'), nil, 'expired'
end

test 'large values' do |c|
  big = 'x' * 500_000
  check c.set('dalli:big', big, nil, raw: true), 'set 500 KB'
  eq c.get('dalli:big', raw: true), big, 'get 500 KB'
  begin
    c.set('dalli:huge', Random.new(1).bytes(2_000_000), nil, raw: true)
    raise Failed, 'a 2 MB value was accepted'
  rescue Dalli::ValueOverMaxSize, Dalli::DalliError
    # refused (by Dalli's own limit or the server's E2BIG)
  end
end

test 'stats, version, flush' do |c|
  st = c.stats.values.first
  check st && st['curr_items'].to_i.positive?, "stats: #{st.inspect[0, 200]}"
  check c.version.values.first.is_a?(String), 'version'
  check c.flush, 'flush'
  eq c.get('dalli:a'), nil, 'flushed'
end

results = []
c = client(opts[:host], opts[:port])
c.flush
TESTS.each do |name, blk|
  begin
    blk.call(c)
    puts "PASS #{name}"
    results << true
  rescue StandardError => e
    puts "FAIL #{name}: #{e.class}: #{e.message}"
    puts e.backtrace.first(3).map { |l| "    #{l}" }
    results << false
  end
end

if opts[:sasl_port]
  begin
    good = client(opts[:host], opts[:sasl_port], username: opts[:user], password: opts[:password])
    check good.set('dalli:sasl', 'secret'), 'set after SASL'
    eq good.get('dalli:sasl'), 'secret', 'get after SASL'
    eq good.get_multi('dalli:sasl', 'dalli:nope'), { 'dalli:sasl' => 'secret' }, 'get_multi after SASL'
    puts 'PASS sasl: right password'
    results << true
  rescue StandardError => e
    puts "FAIL sasl: right password: #{e.class}: #{e.message}"
    results << false
  end
  begin
    bad = client(opts[:host], opts[:sasl_port], username: opts[:user], password: "#{opts[:password]}-wrong")
    v = bad.get('dalli:sasl')
    puts "FAIL sasl: wrong password was let in (got #{v.inspect})"
    results << false
  rescue Dalli::DalliError, Dalli::RingError, Dalli::NetworkError => e
    puts "PASS sasl: wrong password refused (#{e.class})"
    results << true
  end
  begin
    anon = client(opts[:host], opts[:sasl_port])
    v = anon.get('dalli:sasl')
    puts "FAIL sasl: no credentials were let in (got #{v.inspect})"
    results << false
  rescue Dalli::DalliError, Dalli::RingError, Dalli::NetworkError => e
    puts "PASS sasl: no credentials refused (#{e.class})"
    results << true
  end
end

failed = results.count(false)
puts "#{results.size - failed} passed, #{failed} failed"
exit(failed.zero? ? 0 : 1)
