#!/usr/bin/env ruby
# Stores keys through Dalli's ring, for kura-ring's differential tests, which
# then ask each server which keys it holds.
#
# Usage: place_dalli.rb SERVERS KEYS_FILE
#
# SERVERS is a comma-separated list of HOST:PORT:WEIGHT; KEYS_FILE has one
# UTF-8 key per line. Each key is set to "1"; exits non-zero if any set fails.

require 'dalli'
require 'logger'

abort 'usage: place_dalli.rb SERVERS KEYS_FILE' unless ARGV.length == 2

Dalli.logger = Logger.new($stderr)
Dalli.logger.level = Logger::ERROR

servers = ARGV[0].split(',')
keys = File.readlines(ARGV[1], chomp: true, encoding: 'UTF-8')
# No failover: a slow server must fail the test, not move keys elsewhere.
client = Dalli::Client.new(servers, failover: false, socket_timeout: 5)
keys.each do |key|
  abort "dalli: set #{key.inspect} failed" unless client.set(key, '1', 0, raw: true)
end
puts "dalli #{Dalli::VERSION}: #{keys.length} keys set over #{servers.length} servers"
