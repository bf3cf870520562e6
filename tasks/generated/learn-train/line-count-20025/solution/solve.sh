#!/bin/bash
wc -l < /app/queue.txt > /app/tally.txt
