#!/bin/bash
awk '$1=="color" {print $2}' /app/service.cfg > /app/summary.txt
